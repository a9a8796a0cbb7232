package main

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestSidecarManifest checks deployments/kubernetes/sidecar against the
// proxy itself: its HOTSPOT_* variables parse, the probes hit --http, and the
// app's Redis is the proxy's --listen.
func TestSidecarManifest(t *testing.T) {
	b, err := os.ReadFile("../../deployments/kubernetes/sidecar/app-with-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	var appEnv map[string]string
	for _, c := range d.Spec.Template.Spec.Containers {
		m := map[string]string{}
		for _, e := range c.Env {
			v := e.Value
			if e.ValueFrom != nil {
				v = "from-" + e.Name
			}
			m[e.Name] = v
		}
		if c.Name == "hotspot-proxy" {
			env = m
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" {
				t.Error("the proxy's readiness probe is not /healthz")
			}
		} else {
			appEnv = m
		}
	}
	cfg, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the sidecar's environment: %v", err)
	}
	if !strings.HasSuffix(cfg.http, ":6381") || cfg.proxy.App != "shop" || cfg.proxy.Instance != "from-HOTSPOT_INSTANCE" {
		t.Errorf("parsed %+v", cfg)
	}
	if !strings.Contains(appEnv["REDIS_URL"], cfg.listen) {
		t.Errorf("the app's REDIS_URL %q is not the proxy's --listen %s", appEnv["REDIS_URL"], cfg.listen)
	}
}
