package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Fetch and FetchFolder keep local copies of objects, for the sources
// that read whole files (idx, csv) or a folder of them (images): the
// copy is made once, checked against the object's size and tag on every
// open (one HEAD, or one listing for a folder), and made again only when
// the object changed. Reasons: docs/design/remote-sources.md.

// fetchParallel is how many objects FetchFolder downloads at once.
const fetchParallel = 16

// CacheDir is where Fetch keeps its copies: PIPE_REMOTE_CACHE_DIR, else
// pipe/remote in the user's cache folder, else in the temporary folder.
func CacheDir() string {
	if d := firstEnv("PIPE_REMOTE_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "pipe", "remote")
	}
	return filepath.Join(os.TempDir(), "pipe-remote")
}

// cacheName is the cache's folder for URL u served by endpoint where: a
// hash of both, and u's last element to help a person find it.
func cacheName(where string, loc *location) string {
	h := sha256.Sum256([]byte(where + "|" + loc.raw))
	base := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r == '?' || r == '&' || r == '=' {
			return '-'
		}
		return r
	}, filepath.Base(strings.TrimSuffix(loc.key, "/")))
	if len(base) > 40 {
		base = base[:40]
	}
	return filepath.Join(CacheDir(), hex.EncodeToString(h[:8])+"-"+base)
}

// index is a cached folder's record: the object each local file copies.
type index map[string]Entry

func readIndex(path string) index {
	b, err := os.ReadFile(path)
	if err != nil {
		return index{}
	}
	var ix index
	if json.Unmarshal(b, &ix) != nil {
		return index{}
	}
	return ix
}

func writeIndex(path string, ix index) error {
	b, err := json.Marshal(ix)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".index.*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	tmp.Close()
	return os.Rename(tmp.Name(), path)
}

// Fetch is the path of a local copy of the object at URL u, made now
// unless the cache holds one of the object as it is.
func Fetch(ctx context.Context, u string) (string, error) {
	o, err := OpenFolder(u)
	if err != nil {
		return "", err
	}
	var e Entry
	err = o.retry(ctx, "reading its size", func(ctx context.Context) error {
		e, err = o.st.stat(ctx, o.loc)
		return err
	})
	if err != nil {
		return "", err
	}
	dir := cacheName(o.st.where(), o.loc)
	name := e.Rel
	if name == "" || name == "." || name == "/" {
		name = "object"
	}
	local := filepath.Join(dir, name)
	ixPath := dir + ".json"
	ix := readIndex(ixPath)
	if have, ok := ix[name]; ok && have == e && e.ETag != "" && sizeIs(local, e.Size) {
		return local, nil
	}
	if err := o.download(ctx, local); err != nil {
		return "", err
	}
	if err := writeIndex(ixPath, index{name: e}); err != nil {
		return "", fmt.Errorf("%s: keeping its copy: %w", o.loc.shown, err)
	}
	return local, nil
}

func sizeIs(path string, n int64) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Size() == n
}

// FetchFolder is the path of a local copy of the folder at URL u (an
// s3:// or gs:// prefix): every object under it, downloaded
// fetchParallel at a time unless the cache holds it as it is; a file the
// folder no longer has is removed from the copy. It returns the count
// of objects and of those downloaded.
func FetchFolder(ctx context.Context, u string) (dir string, objects, fetched int, err error) {
	es, err := List(ctx, u)
	if err != nil {
		return "", 0, 0, err
	}
	folder, err := OpenFolder(strings.TrimSuffix(u, "/"))
	if err != nil {
		return "", 0, 0, err
	}
	if len(es) == 0 {
		return "", 0, 0, fmt.Errorf("%s: %w (no object under it)", folder.loc.shown, errNotFound)
	}
	dir = cacheName(folder.st.where(), folder.loc)
	ixPath := dir + ".json"
	ix := readIndex(ixPath)
	keep := index{}
	var todo []Entry
	for _, e := range es {
		if !filepath.IsLocal(filepath.FromSlash(e.Rel)) {
			continue // a key that would land outside the copy
		}
		if have, ok := ix[e.Rel]; ok && have == e && e.ETag != "" && sizeIs(filepath.Join(dir, filepath.FromSlash(e.Rel)), e.Size) {
			keep[e.Rel] = e
			continue
		}
		todo = append(todo, e)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, fetchParallel)
	)
	for _, e := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := folder.Child(e.Rel).download(ctx, filepath.Join(dir, filepath.FromSlash(e.Rel)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
					cancel()
				}
				return
			}
			keep[e.Rel] = e
		})
	}
	wg.Wait()
	// What was downloaded is recorded even when another object failed,
	// so that the next try fetches only the rest.
	if werr := writeIndex(ixPath, keep); werr != nil && first == nil {
		first = fmt.Errorf("%s: keeping its copy: %w", folder.loc.shown, werr)
	}
	if first != nil {
		return "", len(es), 0, first
	}
	prune(dir, keep)
	return dir, len(es), len(todo), nil
}

// prune removes the files of dir that keep does not list: objects
// deleted from the folder since it was copied, and partial downloads.
func prune(dir string, keep index) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, rerr := filepath.Rel(dir, p)
		if rerr != nil {
			return nil
		}
		if _, ok := keep[filepath.ToSlash(rel)]; !ok {
			if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				return nil
			}
		}
		return nil
	})
}
