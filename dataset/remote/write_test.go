package remote

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPutListDownloadDelete writes objects through the in-process S3
// with every third request failing (retried), lists the folder, reads
// them back by download, and deletes one; a missing object's download
// is ErrNotFound and leaves the local file as it was.
func TestPutListDownloadDelete(t *testing.T) {
	s := startS3(t, nil)
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	s.FailEvery.Store(3)
	ctx := context.Background()
	dir := t.TempDir()
	big := payload(3 << 20)
	src := filepath.Join(dir, "last.ckpt")
	if err := os.WriteFile(src, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, s.URL("runs/a/last.ckpt"), src); err != nil {
		t.Fatal(err)
	}
	if err := PutBytes(ctx, s.URL("runs/a/job"), []byte("slurm-7\n")); err != nil {
		t.Fatal(err)
	}
	if err := PutBytes(ctx, s.URL("runs/ab/other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Get("runs/a/last.ckpt"); !bytes.Equal(b, big) {
		t.Fatalf("the object holds %d bytes, want the file's %d", len(b), len(big))
	}
	es, err := List(ctx, s.URL("runs/a")+"/")
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, e := range es {
		rels = append(rels, e.Rel)
	}
	if !slices.Equal(rels, []string{"job", "last.ckpt"}) || es[1].Size != int64(len(big)) || es[1].ETag == "" {
		t.Errorf("listed %+v", es)
	}
	dst := filepath.Join(dir, "copy", "last.ckpt")
	if err := Download(ctx, s.URL("runs/a/last.ckpt"), dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, big) {
		t.Error("the download differs from the object")
	}
	if err := Delete(ctx, s.URL("runs/a/last.ckpt")); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, s.URL("runs/a/last.ckpt")); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
	err = Download(ctx, s.URL("runs/a/last.ckpt"), dst)
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("downloading a deleted object: %v", err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, big) {
		t.Error("a failed download changed the local file")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "copy", ".*")); len(left) > 0 {
		t.Errorf("partial downloads left behind: %v", left)
	}
	if s.Failed.Load() == 0 {
		t.Error("no request failed: the retries were not exercised")
	}
	noSecret(t, err.Error())
}

// TestWritable: pipe writes s3:// and gs:// (with HMAC keys) and refuses
// every other scheme, and gs:// without keys, before any request.
func TestWritable(t *testing.T) {
	t.Setenv("GS_ACCESS_KEY_ID", "")
	for u, want := range map[string]string{
		"s3://b/ckpt":      "",
		"http://h/ckpt":    "s3:// and gs:// URLs only",
		"ftp://h/ckpt":     "s3:// and gs:// URLs only",
		"az://c/ckpt":      "s3:// and gs:// URLs only",
		"gs://b/ckpt":      "GS_ACCESS_KEY_ID",
		"s3://b":           "give s3://bucket/key",
		"s3://k:s@b/ckpt?": "credentials go in the environment",
	} {
		err := Writable(u)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", u, err, want)
		}
	}
}

// TestGSWritesThroughHMAC writes, lists and reads a gs:// folder on the
// in-process server, as Cloud Storage's S3-compatible API is used with
// HMAC keys (CPL_GS_ENDPOINT points the client at it).
func TestGSWritesThroughHMAC(t *testing.T) {
	s := startS3(t, nil)
	for k, v := range s.GSEnv() {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	u := "gs://" + "pipe" + "/ckpt/last.ckpt"
	if err := PutBytes(ctx, u, []byte("weights")); err != nil {
		t.Fatal(err)
	}
	if b, ok := s.Get("ckpt/last.ckpt"); !ok || string(b) != "weights" {
		t.Fatalf("the server holds %q", b)
	}
	es, err := List(ctx, "gs://pipe/ckpt")
	if err != nil || len(es) != 1 || es[0].Rel != "last.ckpt" {
		t.Errorf("listed %+v, %v", es, err)
	}
	dst := filepath.Join(t.TempDir(), "last.ckpt")
	if err := Download(ctx, u, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "weights" {
		t.Errorf("downloaded %q", b)
	}
}

// TestFetchFolderKeepsACopy copies a folder once, fetches again only
// what changed, and drops what the folder no longer has; Fetch does the
// same for one object.
func TestFetchFolderKeepsACopy(t *testing.T) {
	objs := map[string][]byte{"imgs/cat/1.png": payload(5000), "imgs/cat/2.png": []byte("two"), "imgs/dog/3.png": []byte("three"), "other/x": []byte("x")}
	s := startS3(t, objs)
	t.Setenv("PIPE_REMOTE_CACHE_DIR", t.TempDir())
	ctx := context.Background()
	dir, n, got, err := FetchFolder(ctx, s.URL("imgs"))
	if err != nil || n != 3 || got != 3 {
		t.Fatalf("first copy: %d objects, %d fetched, %v", n, got, err)
	}
	for k, b := range objs {
		if !strings.HasPrefix(k, "imgs/") {
			continue
		}
		if have, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(k, "imgs/")))); !bytes.Equal(have, b) {
			t.Errorf("%s differs", k)
		}
	}
	if _, _, got, err := FetchFolder(ctx, s.URL("imgs")+"/"); err != nil || got != 0 {
		t.Errorf("second copy fetched %d (%v), want 0", got, err)
	}
	s.Put("imgs/cat/2.png", []byte("TWO!"))
	s.Delete("imgs/dog/3.png")
	dir2, n, got, err := FetchFolder(ctx, s.URL("imgs"))
	if err != nil || dir2 != dir || n != 2 || got != 1 {
		t.Errorf("after a change: %s, %d objects, %d fetched, %v", dir2, n, got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cat", "2.png")); string(b) != "TWO!" {
		t.Errorf("the changed object reads %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "dog", "3.png")); err == nil {
		t.Error("a deleted object is still in the copy")
	}
	if _, _, _, err := FetchFolder(ctx, s.URL("none")); !errors.Is(err, ErrNotFound) {
		t.Errorf("an empty folder: %v", err)
	}

	before := s.Requests.Load()
	p, err := Fetch(ctx, s.URL("other/x"))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Fetch(ctx, s.URL("other/x"))
	if err != nil || p2 != p {
		t.Fatalf("second fetch: %s, %v", p2, err)
	}
	if n := s.Requests.Load() - before; n != 3 {
		t.Errorf("two fetches sent %d requests, want 3 (HEAD, GET, HEAD)", n)
	}
	s.Put("other/x", []byte("y"))
	if p, err := Fetch(ctx, s.URL("other/x")); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(p); string(b) != "y" {
		t.Errorf("after a change the copy reads %q", b)
	}
}
