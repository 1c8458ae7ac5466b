//go:build !amd64

package cpu

func adamVec(p, g, m1, m2 []float32, k *adamConsts) int { return 0 }
