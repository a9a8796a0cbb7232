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

// TestImage builds the images of hotspotd and of the sidecar proxy with
// `make image` (buildah, in a private vfs store that is deleted afterwards),
// exports them, and checks what a container would run: a non-root numeric
// user, the entrypoint, a static binary as the image's only file, and that
// this binary answers --help. Containers cannot run on these machines;
// building and extracting can.
func TestImage(t *testing.T) {
	buildah := needTool(t, "buildah")
	if testing.Short() {
		t.Skip("builds an image")
	}
	needTool(t, "make")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	store := t.TempDir()
	bah := fmt.Sprintf("%s --root %s --runroot %s --storage-driver vfs", buildah,
		filepath.Join(store, "root"), filepath.Join(store, "run"))
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	images := []struct{ image, binary, env, port string }{
		{fmt.Sprintf("localhost/hotspotd:test-%d", os.Getpid()), "hotspotd", "HOTSPOT_HTTP_ADDR=:7070", "7070/tcp"},
		{fmt.Sprintf("localhost/hotspot-proxy:test-%d", os.Getpid()), "hotspot-proxy", "HOTSPOT_HTTP=:6381", "6381/tcp"},
	}
	run("make", "-C", "..", "--no-print-directory", "image", "IMAGE="+images[0].image,
		"PROXY_IMAGE="+images[1].image, "IMAGE_BUILD="+bah+" build")
	t.Cleanup(func() {
		// vfs layers are plain directories; rmi first so that nothing is
		// left locked.
		exec.Command("sh", "-c", bah+" rmi --all").Run()
	})
	for _, im := range images {
		out := filepath.Join(t.TempDir(), "image")
		args := append(strings.Fields(bah)[1:], "push", im.image, "dir:"+out)
		run(buildah, args...)
		checkImage(ctx, t, out, im.image, im.binary, im.env, im.port)
	}
}

// checkImage checks the image exported to dir: its user, entrypoint,
// environment and port, and its one static binary, which must answer --help.
func checkImage(ctx context.Context, t *testing.T, dir, image, binary, env, port string) {
	t.Helper()
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
		Layers []struct {
			MediaType, Digest string
		} `json:"layers"`
	}
	readJSON(t, filepath.Join(dir, "manifest.json"), &manifest)
	var config struct {
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			Env          []string
			ExposedPorts map[string]struct{}
		} `json:"config"`
	}
	readJSON(t, filepath.Join(dir, blob(manifest.Config.Digest)), &config)
	c := config.Config
	if c.User != "65532:65532" {
		t.Errorf("%s: User = %q, want 65532:65532 (numeric, not root)", image, c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/" + binary}) || len(c.Cmd) != 0 {
		t.Errorf("%s: Entrypoint %q, Cmd %q; want [/%s], none", image, c.Entrypoint, c.Cmd, binary)
	}
	if !slices.Contains(c.Env, env) {
		t.Errorf("%s: Env = %q, want %s", image, c.Env, env)
	}
	if _, ok := c.ExposedPorts[port]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("%s: ExposedPorts = %v, want %s", image, c.ExposedPorts, port)
	}

	if len(manifest.Layers) != 1 {
		t.Fatalf("%s: %d layers, want 1 (the binary on scratch)", image, len(manifest.Layers))
	}
	files := layerFiles(t, filepath.Join(dir, blob(manifest.Layers[0].Digest)), manifest.Layers[0].MediaType)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if len(files) != 1 || files[binary] == nil {
		t.Fatalf("%s: image files %q, want only %s", image, names, binary)
	}
	bin := filepath.Join(t.TempDir(), binary)
	if err := os.WriteFile(bin, files[binary], 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s in the image has a dynamic loader: not static", binary)
		}
	}
	f.Close()
	help, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if !strings.Contains(string(help), "usage: "+binary) {
		t.Fatalf("%s --help from the image:\n%s", binary, help)
	}
	t.Logf("image %s: one layer, %d-byte static %s, user %s; --help answers", image, len(files[binary]), binary, c.User)
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
