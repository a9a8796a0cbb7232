package deployments

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

var update = flag.Bool("update", false, "regenerate kubernetes/base/prometheusrule.yaml from prometheus/alerts.yml")

const k8sDir = "kubernetes"

// decodeStrict decodes one Kubernetes object into its k8s.io/api (or
// Prometheus Operator) type; a field the type does not have is an error.
func decodeStrict(doc []byte) (any, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "apps/v1 Deployment": // sidecar/: an app with hotspot-proxy beside it
		obj = &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
	default:
		return nil, fmt.Errorf("unexpected object %s %s (add it to decodeStrict)", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// TestManifestsDecodeStrictly decodes every manifest file as written, and
// the output of kustomize for the base and every overlay.
func TestManifestsDecodeStrictly(t *testing.T) {
	err := filepath.WalkDir(k8sDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range splitDocs(b) {
			if _, err := decodeStrict(doc); err != nil {
				t.Errorf("%s, document %d: %v", path, i+1, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range kustomizations(t) {
		if n := len(render(t, dir)); n < 6 {
			t.Errorf("%s renders %d objects, want at least 6", dir, n)
		}
	}

	// The decoder does refuse what the types do not have.
	bad := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selector: {a: b}\n  publishNotReady: true\n")
	if _, err := decodeStrict(bad); err == nil {
		t.Error("a Service with an unknown field decoded without an error")
	}
}

// TestManifestsMatchHotspotd checks the rendered base and overlays against
// hotspotd itself: every HOTSPOT_* variable is one of its flags with a value
// it accepts, the ports and probe paths are the ones it serves, and the
// objects point at each other.
func TestManifestsMatchHotspotd(t *testing.T) {
	bin := filepath.Join(binaries(t), "hotspotd")
	uid := containerfileUser(t)
	for _, dir := range kustomizations(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := render(t, dir)
			m := index(t, objs)
			sts := m.statefulSet
			pod := sts.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			c := pod.Containers[0]
			env := m.env(t, c)

			// Flags: hotspotd --name=value ... --help parses every one
			// (unknown names and ill-typed values exit 2).
			var args []string
			for name, v := range env {
				if flagName, ok := strings.CutPrefix(name, "HOTSPOT_"); ok {
					args = append(args, "--"+strings.ReplaceAll(strings.ToLower(flagName), "_", "-")+"="+v)
				} else if !m.referenced(c, name) {
					t.Errorf("env %s is neither a HOTSPOT_* flag nor used by one", name)
				}
			}
			if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("hotspotd %s --help: %v\n%s", strings.Join(args, " "), err, out)
			}

			// Stable ids and addresses.
			if env["HOTSPOT_ID"] != "hotspotd-0" {
				t.Errorf("HOTSPOT_ID of pod hotspotd-0 = %q, want the pod's name", env["HOTSPOT_ID"])
			}
			_, port, err := net.SplitHostPort(env["HOTSPOT_HTTP_ADDR"])
			if err != nil {
				t.Fatalf("HOTSPOT_HTTP_ADDR: %v", err)
			}
			var httpPort *corev1.ContainerPort
			for i := range c.Ports {
				if strconv.Itoa(int(c.Ports[i].ContainerPort)) == port {
					httpPort = &c.Ports[i]
				}
			}
			if httpPort == nil || httpPort.Name == "" {
				t.Fatalf("no named container port %s (HOTSPOT_HTTP_ADDR); ports %+v", port, c.Ports)
			}
			headless := m.services[sts.Spec.ServiceName]
			if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
				t.Errorf("serviceName %q: not a headless Service that publishes not-ready pods", sts.Spec.ServiceName)
			}
			if want := "hotspotd-0." + sts.Spec.ServiceName + ":" + port; env["HOTSPOT_ADVERTISE_ADDR"] != want {
				t.Errorf("HOTSPOT_ADVERTISE_ADDR = %q, want %q", env["HOTSPOT_ADVERTISE_ADDR"], want)
			}

			// Probes: on that port, at the paths checked against a running
			// hotspotd below.
			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("no HTTP %s probe", name)
					continue
				}
				if pp := p.HTTPGet.Port; pp.String() != httpPort.Name && pp.String() != port {
					t.Errorf("%s probe on port %s, want %s", name, pp.String(), httpPort.Name)
				}
			}
			if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("liveness %s, readiness %s; want /healthz, /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
			}

			// Services, the ServiceMonitor and the budget select the pods.
			labels := sts.Spec.Template.Labels
			if !subset(sts.Spec.Selector.MatchLabels, labels) {
				t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector.MatchLabels, labels)
			}
			for name, s := range m.services {
				if !subset(s.Spec.Selector, labels) {
					t.Errorf("Service %s selects %v, not the pods %v", name, s.Spec.Selector, labels)
				}
				for _, sp := range s.Spec.Ports {
					if sp.TargetPort.String() != httpPort.Name {
						t.Errorf("Service %s targets port %s, want %s", name, sp.TargetPort.String(), httpPort.Name)
					}
				}
			}
			if m.pdb == nil || !subset(m.pdb.Spec.Selector.MatchLabels, labels) || m.pdb.Spec.MaxUnavailable == nil {
				t.Errorf("PodDisruptionBudget missing, without maxUnavailable, or not selecting the pods")
			}
			var scraped []string
			for name, s := range m.services {
				if selects(m.serviceMonitor.Spec.Selector.MatchLabels, m.serviceMonitor.Spec.Selector.MatchExpressions, s.Labels) {
					scraped = append(scraped, name)
					for _, e := range m.serviceMonitor.Spec.Endpoints {
						if e.Port != s.Spec.Ports[0].Name || e.Path != "/metrics" {
							t.Errorf("ServiceMonitor endpoint port %q path %q; want %q, /metrics", e.Port, e.Path, s.Spec.Ports[0].Name)
						}
					}
				}
			}
			if len(scraped) != 1 || scraped[0] != "hotspotd" {
				t.Errorf("ServiceMonitor selects Services %v, want [hotspotd] (the job name the alerts use)", scraped)
			}

			// Non-root, read-only, and credentials only from Secrets.
			psc, csc := pod.SecurityContext, c.SecurityContext
			if psc == nil || csc == nil || !isTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser != uid ||
				!isTrue(csc.ReadOnlyRootFilesystem) || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
				csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("security: pod %+v, container %+v; want non-root user %d (the image's), read-only root, no escalation, no capabilities", psc, csc, uid)
			}
			for _, e := range c.Env {
				if strings.Contains(e.Name, "TOKEN") && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s does not come from a Secret", e.Name)
				}
			}
			for name, cm := range m.configMaps {
				for k := range cm.Data {
					if strings.Contains(k, "TOKEN") {
						t.Errorf("ConfigMap %s holds %s: credentials belong in a Secret", name, k)
					}
				}
			}
			req, lim := c.Resources.Requests, c.Resources.Limits
			if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
				t.Errorf("resources %+v: want cpu and memory requests and a memory limit >= the request", c.Resources)
			}
		})
	}
	t.Run("served", func(t *testing.T) { probeRunningHotspotd(t, bin) })
}

// probeRunningHotspotd runs hotspotd with the base's environment (addresses
// and names pointed at the test stack) and asks it for the probe and scrape
// paths of the manifests.
func probeRunningHotspotd(t *testing.T, bin string) {
	kafka, zk := stacktest.Kafka(t), stacktest.ZK(t)
	m := index(t, render(t, filepath.Join(k8sDir, "base")))
	c := m.statefulSet.Spec.Template.Spec.Containers[0]
	env := m.env(t, c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	name := stacktest.Name(t)
	env["HOTSPOT_BROKERS"], env["HOTSPOT_ZK"] = kafka, zk
	env["HOTSPOT_ZK_ROOT"], env["HOTSPOT_TOPIC"], env["HOTSPOT_GROUP"] = "/"+name, name, name
	env["HOTSPOT_HTTP_ADDR"], env["HOTSPOT_ADVERTISE_ADDR"] = addr, addr
	env["HOTSPOT_PARTITIONS"] = "1"
	// The Secret volume's file (the cluster secret), as the kubelet mounts it.
	if _, ok := env["HOTSPOT_CLUSTER_SECRET_FILE"]; !ok {
		t.Fatal("the manifests give hotspotd no cluster secret: it would bind loopback only")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["HOTSPOT_CLUSTER_SECRET_FILE"] = secret
	cmd := exec.Command(bin)
	cmd.Env = []string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hotspotd exited with %v after SIGINT\n%s", err, logs)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("hotspotd did not stop within 20 s of SIGINT")
		}
	}()
	paths := []string{c.StartupProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path,
		m.serviceMonitor.Spec.Endpoints[0].Path}
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range paths {
		for {
			resp, err := http.Get("http://" + addr + p)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v %v within 60 s\n%s", p, resp, err, logs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// manifests is the rendered objects of one kustomization, by kind.
type manifests struct {
	statefulSet    *appsv1.StatefulSet
	services       map[string]*corev1.Service
	configMaps     map[string]*corev1.ConfigMap
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
}

func index(t *testing.T, objs []any) *manifests {
	t.Helper()
	m := &manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			m.statefulSet = o
		case *corev1.Service:
			m.services[o.Name] = o
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			m.pdb = o
		case *monitoringv1.ServiceMonitor:
			m.serviceMonitor = o
		case *monitoringv1.PrometheusRule:
			m.rule = o
		}
	}
	if m.statefulSet == nil || m.serviceMonitor == nil || m.rule == nil || len(m.services) == 0 {
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, fmt.Sprintf("%T", o))
		}
		t.Fatalf("want a StatefulSet, Services, a ServiceMonitor and a PrometheusRule; have %v", kinds)
	}
	return m
}

// env returns the container's environment as the kubelet would give it to
// pod hotspotd-0: ConfigMaps first, then env in order with $(VAR)
// expanded; a Secret's value reads "secret".
func (m *manifests) env(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || m.configMaps[from.ConfigMapRef.Name] == nil {
			t.Fatalf("envFrom %+v: not a ConfigMap of the manifests", from)
		}
		cm := m.configMaps[from.ConfigMapRef.Name]
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(s string) string {
				v, ok := env[s[2:len(s)-1]]
				if !ok {
					t.Errorf("env %s refers to %s, defined nowhere before it", e.Name, s)
				}
				return v
			})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = "hotspotd-0"
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret"
		default:
			t.Errorf("env %s: unexpected source %+v", e.Name, e.ValueFrom)
		}
	}
	return env
}

// referenced reports whether another variable uses $(name).
func (m *manifests) referenced(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if strings.Contains(e.Value, "$("+name+")") {
			return true
		}
	}
	return false
}

// TestPrometheusRuleMatchesAlerts keeps the PrometheusRule of the base equal
// to prometheus/alerts.yml (-update regenerates it).
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(k8sDir, "base", "prometheusrule.yaml")
	if *update {
		cur, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		head, _, ok := strings.Cut(string(cur), "spec:\n")
		if !ok {
			t.Fatalf("%s has no spec", target)
		}
		var b strings.Builder
		b.WriteString(head + "spec:\n")
		sc := bufio.NewScanner(strings.NewReader(string(src)))
		for sc.Scan() {
			if l := sc.Text(); !strings.HasPrefix(l, "#") {
				b.WriteString(strings.TrimRight("  "+l, " ") + "\n")
			}
		}
		if err := os.WriteFile(target, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(src, &want); err != nil {
		t.Fatalf("alerts.yml as a PrometheusRule spec: %v", err)
	}
	b, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*monitoringv1.PrometheusRule).Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs from prometheus/alerts.yml; run go test ./deployments -run %s -update", target, t.Name())
	}
}

// kustomizations returns the base and every overlay.
func kustomizations(t *testing.T) []string {
	t.Helper()
	dirs := []string{filepath.Join(k8sDir, "base")}
	overlays, err := filepath.Glob(filepath.Join(k8sDir, "overlays", "*", "kustomization.yaml"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no overlay under %s/overlays (%v)", k8sDir, err)
	}
	for _, o := range overlays {
		dirs = append(dirs, filepath.Dir(o))
	}
	return dirs
}

// render runs kustomize (the library kubectl embeds) on dir and decodes
// every object strictly.
func render(t *testing.T, dir string) []any {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var objs []any
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict(b)
		if err != nil {
			t.Errorf("kustomize %s, %s: %v", dir, r.CurId(), err)
			continue
		}
		objs = append(objs, o)
	}
	return objs
}

func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// containerfileUser is the numeric user the image runs as.
func containerfileUser(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(repoFile("Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Containerfile has no numeric USER")
	}
	uid, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return uid
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// selects evaluates a label selector of matchLabels and Exists/DoesNotExist
// expressions (the operators the manifests use).
func selects(match map[string]string, exprs []metav1.LabelSelectorRequirement, labels map[string]string) bool {
	if !subset(match, labels) {
		return false
	}
	for _, e := range exprs {
		_, has := labels[e.Key]
		switch e.Operator {
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }
