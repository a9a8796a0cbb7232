package deployments

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestImage builds the hotspotd image with `make image` (buildah, in a
// private vfs store that is deleted afterwards), exports it, and checks what
// a container would run: a non-root numeric user, the entrypoint, a static
// binary as the image's only file, and that this binary answers --help.
// Containers cannot run on these machines; building and extracting can.
func TestImage(t *testing.T) {
	buildah := needTool(t, "buildah")
	if testing.Short() {
		t.Skip("builds an image")
	}
	needTool(t, "make")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	store := t.TempDir()
	bah := fmt.Sprintf("%s --root %s --runroot %s --storage-driver vfs", buildah,
		filepath.Join(store, "root"), filepath.Join(store, "run"))
	image := fmt.Sprintf("localhost/hotspotd:test-%d", os.Getpid())
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	run("make", "-C", "..", "--no-print-directory", "image", "IMAGE="+image, "IMAGE_BUILD="+bah+" build")
	t.Cleanup(func() {
		// vfs layers are plain directories; rmi first so that nothing is
		// left locked.
		exec.Command("sh", "-c", bah+" rmi --all").Run()
	})
	out := filepath.Join(t.TempDir(), "image")
	args := append(strings.Fields(bah)[1:], "push", image, "dir:"+out)
	run(buildah, args...)

	var manifest struct {
		Config struct{ Digest string } `json:"config"`
		Layers []struct {
			MediaType, Digest string
		} `json:"layers"`
	}
	readJSON(t, filepath.Join(out, "manifest.json"), &manifest)
	var config struct {
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			Env          []string
			ExposedPorts map[string]struct{}
		} `json:"config"`
	}
	readJSON(t, filepath.Join(out, blob(manifest.Config.Digest)), &config)
	c := config.Config
	if c.User != "65532:65532" {
		t.Errorf("User = %q, want 65532:65532 (numeric, not root)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/hotspotd"}) || len(c.Cmd) != 0 {
		t.Errorf("Entrypoint %q, Cmd %q; want [/hotspotd], none", c.Entrypoint, c.Cmd)
	}
	if !slices.Contains(c.Env, "HOTSPOT_HTTP_ADDR=:7070") {
		t.Errorf("Env = %q, want HOTSPOT_HTTP_ADDR=:7070", c.Env)
	}
	if _, ok := c.ExposedPorts["7070/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("ExposedPorts = %v, want 7070/tcp", c.ExposedPorts)
	}

	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1 (the binary on scratch)", len(manifest.Layers))
	}
	files := layerFiles(t, filepath.Join(out, blob(manifest.Layers[0].Digest)), manifest.Layers[0].MediaType)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if len(files) != 1 || files["hotspotd"] == nil {
		t.Fatalf("image files %q, want only hotspotd", names)
	}
	bin := filepath.Join(t.TempDir(), "hotspotd")
	if err := os.WriteFile(bin, files["hotspotd"], 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("hotspotd in the image has a dynamic loader: not static")
		}
	}
	f.Close()
	help, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "usage: hotspotd") {
		t.Fatalf("hotspotd --help from the image: %v\n%s", err, help)
	}
	t.Logf("image %s: one layer, %d-byte static hotspotd, user %s; --help answers", image, len(files["hotspotd"]), c.User)
}

func blob(digest string) string { _, hex, _ := strings.Cut(digest, ":"); return hex }

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// layerFiles returns the regular files of a layer tarball by path.
func layerFiles(t *testing.T, path, mediaType string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = bytes.NewReader(b)
	if strings.HasSuffix(mediaType, "gzip") {
		if r, err = gzip.NewReader(r); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = data
		}
	}
}
