"""Float32 error of Winograd F(4x4, 3x3) for a choice of interpolation points.

For each set of five finite points (and infinity) it builds the Toom-Cook
matrices Aᵀ, G, Bᵀ exactly (sympy), checks that they compute the 3×3
correlation, then runs the forward and the weight gradient of random tiles
(standard normal data and weights, 64 input and 16 output channels, 300
tiles) in float32 and in float64, and prints their error from float64 as a
multiple of the float32 direct convolution's (im2col and one matrix product)
on the same inputs: the largest difference over the largest output, and the
root mean square, averaged over three seeds. docs/design/native-winograd.md
says what it found and which points pipe uses.

    python3 bench/winograd_points.py      (needs numpy and sympy)
"""
from fractions import Fraction as Fr

import numpy as np
import sympy as sp


def matrices(pts):
    """Aᵀ (4×6), G (6×3), Bᵀ (6×6) for the finite points pts and ∞."""
    R = sp.Rational
    AT, G = sp.zeros(4, 6), sp.zeros(6, 3)
    for j, p in enumerate(pts):
        n = sp.prod([R(p) - R(q) for q in pts if q != p])
        for i in range(4):
            AT[i, j] = R(p) ** i
        for k in range(3):
            G[j, k] = R(p) ** k / n
    AT[3, 5], G[5, 2] = 1, 1
    # Bᵀ solves Σ_j Aᵀ[i,j]·G[j,k]·Bᵀ[j,l] = [l == i+k].
    S = sp.Matrix(12, 6, lambda r, j: AT[r // 3, j] * G[j, r % 3])
    BT = sp.zeros(6, 6)
    for l in range(6):
        rhs = sp.Matrix([int(l == i + k) for i in range(4) for k in range(3)])
        col = (S.T * S).solve(S.T * rhs)
        assert S * col == rhs
        BT[:, l] = col
    return AT, G, BT


def errors(pts, seed, T=300, ci=64, co=16):
    AT, G, BT = matrices(pts)
    r = np.random.default_rng(seed)
    x = r.standard_normal((T, ci, 6, 6)).astype(np.float32)
    g = r.standard_normal((co, ci, 3, 3)).astype(np.float32)
    dy = r.standard_normal((T, co, 4, 4)).astype(np.float32)
    cols = np.stack([x[:, :, i:i + 4, j:j + 4] for i in range(3) for j in range(3)], 2)
    cols = cols.transpose(1, 2, 0, 3, 4).reshape(ci * 9, T * 16)
    wino, direct = {}, {}
    for dt in (np.float32, np.float64):
        a, gg, b = (np.array(m.tolist(), dtype=float).astype(dt) for m in (AT, G, BT))
        V, U = b @ x.astype(dt) @ b.T, gg @ g.astype(dt) @ gg.T
        M = np.empty((T, co, 6, 6), dt)
        dU = np.empty((co, ci, 6, 6), dt)
        Md = a.T @ dy.astype(dt) @ a
        for p in range(6):
            for q in range(6):
                M[:, :, p, q] = V[:, :, p, q] @ U[:, :, p, q].T
                dU[:, :, p, q] = Md[:, :, p, q].T @ V[:, :, p, q]
        wino[dt] = (a @ M @ a.T, gg.T @ dU @ gg)
        c, dyc = cols.astype(dt), dy.transpose(1, 0, 2, 3).reshape(co, T * 16).astype(dt)
        y = (g.reshape(co, ci * 9).astype(dt) @ c).reshape(co, T, 4, 4).transpose(1, 0, 2, 3)
        direct[dt] = (y, (dyc @ c.T).reshape(co, ci, 3, 3))

    def err(v, ref):
        return np.array([np.abs(v - ref).max() / np.abs(ref).max(),
                         np.sqrt(((v - ref) ** 2).mean() / (ref ** 2).mean())])

    out = []
    for k in range(2):
        ref = direct[np.float64][k]
        assert err(wino[np.float64][k], ref)[0] < 1e-12, pts
        out.extend(err(wino[np.float32][k], ref) / err(direct[np.float32][k], ref))
    return out


if __name__ == '__main__':
    h = Fr(1, 2)
    sets = {
        '0, ±1, ±2': [0, 1, -1, 2, -2],
        '0, ±1, ±1/2': [0, 1, -1, h, -h],
        '0, ±1, 2, -1/2': [0, 1, -1, 2, -h],
        '0, ±1, 1/2, -2': [0, 1, -1, h, -2],
        '0, ±1, 2, 1/2': [0, 1, -1, 2, h],
        '0, ±1, 3/2, -2/3': [0, 1, -1, Fr(3, 2), Fr(-2, 3)],
        '0, ±1, 2, -1/3': [0, 1, -1, 2, Fr(-1, 3)],
    }
    print('points              forward: largest  rms   weight gradient: largest  rms')
    for name, pts in sets.items():
        e = np.mean([errors(pts, s) for s in range(3)], axis=0)
        print(f'{name:18s} {e[0]:16.1f} {e[1]:5.1f} {e[2]:25.1f} {e[3]:5.1f}')
