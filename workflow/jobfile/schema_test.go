package jobfile

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"pipe/planner/plan"
)

// trainingOperator is the Kubeflow training operator whose PyTorchJob
// CRD the manifests are held against, as its Go module publishes it.
const (
	trainingOperator = "github.com/kubeflow/training-operator@v1.8.1"
	pytorchJobCRD    = "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"
)

// pytorchJobSchema compiles the CRD's openAPIV3Schema, downloading the
// operator's module with the go command into the module cache; it skips
// when that cannot be done, unless PIPE_REQUIRE_K8S_SCHEMA is set.
func pytorchJobSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("PIPE_REQUIRE_K8S_SCHEMA") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (PIPE_REQUIRE_K8S_SCHEMA=1 makes this a failure)", args...)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module crdfetch\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", trainingOperator)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		skip("cannot download %s to read the PyTorchJob CRD: %v %s %s", trainingOperator, err, mod.Error, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, pytorchJobCRD))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" {
			continue
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft4) // OpenAPI 3.0's schema objects are draft 4's, extended
		if err := c.AddResource("pytorchjob.json", v.Schema.OpenAPIV3Schema); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("pytorchjob.json")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Fatalf("%s has no v1", pytorchJobCRD)
	return nil
}

// pytorchJob is a manifest's PyTorchJob document as JSON values.
func pytorchJob(t *testing.T, manifest []byte) any {
	t.Helper()
	for _, d := range bytes.Split(manifest, []byte("\n---\n")) {
		if !bytes.Contains(d, []byte("kind: PyTorchJob")) {
			continue
		}
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Fatal("no PyTorchJob")
	return nil
}

// TestManifestsMatchTheCRD: the PyTorchJobs pipe launch writes (GPU and
// CPU, fixed and elastic, with and without claims) validate against the
// training operator's CRD schema, and a broken one does not.
func TestManifestsMatchTheCRD(t *testing.T) {
	s := pytorchJobSchema(t)
	cases := map[string]struct {
		j *Job
		o K8s
	}{
		"gpu":     {job(plan.BackendGPU, 4, 8), K8s{Image: "img", DataClaim: "data", CheckpointClaim: "ckpt", Namespace: "ml"}},
		"cpu":     {job(plan.BackendCPU, 1, 2), K8s{Image: "img", RunArgs: []string{"--max-steps", "5"}}},
		"elastic": {job(plan.BackendGPU, 2, 4), K8s{Image: "img", Elastic: true, MinNodes: 1, MaxNodes: 4, MaxRestarts: 3}},
	}
	var gpu []byte
	for name, c := range cases {
		b, err := Manifest(c.j, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if name == "gpu" {
			gpu = b
		}
		if err := s.Validate(pytorchJob(t, b)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for what, broken := range map[string][]byte{
		"replicas as a string":   bytes.Replace(gpu, []byte("replicas: 1\n"), []byte("replicas: \"1\"\n"), 1),
		"nprocPerNode as a list": bytes.Replace(gpu, []byte(`nprocPerNode: "8"`), []byte("nprocPerNode: [8]"), 1),
		"no containers":          bytes.Replace(gpu, []byte("containers:"), []byte("kontainers:"), 1),
	} {
		if bytes.Equal(broken, gpu) {
			t.Fatalf("%s: the manifest did not change", what)
		}
		err := s.Validate(pytorchJob(t, broken))
		if err == nil {
			t.Errorf("%s: validates", what)
		} else if !strings.Contains(err.Error(), "pytorchReplicaSpecs") && !strings.Contains(err.Error(), "nprocPerNode") {
			t.Errorf("%s: the error does not say where: %v", what, err)
		}
	}
}

// TestManifestFitsACluster: a GPU job's pods carry the node selector,
// the tolerations and the memory asked for, a /dev/shm sized for the
// node's ranks, and the job a backoff limit; without --mem-per-node a
// GPU pod still requests its loader's buffers and its /dev/shm. A
// checkpoint claim on several nodes says it must be ReadWriteMany. The
// manifest still validates against the training operator's CRD.
func TestManifestFitsACluster(t *testing.T) {
	j := job(plan.BackendGPU, 2, 8)
	j.Plan.Loader.BufferBytes = 100 << 20
	limit := 6
	tol, err := ParseToleration("nvidia.com/gpu:NoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	o := K8s{Image: "img", CheckpointClaim: "ckpt", BackoffLimit: &limit, NodeSelector: map[string]string{"gpu": "h100"},
		Tolerations: []Toleration{tol, {Key: "team", Value: "ml"}}, MemPerNode: 900 << 30, ShmBytes: 3 << 30}
	b, err := Manifest(j, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("# The claim ckpt must be ReadWriteMany")) {
		t.Errorf("no word of ReadWriteMany:\n%s", b)
	}
	var m map[string]any
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if bytes.Contains(d, []byte("kind: PyTorchJob")) {
			if err := yaml.Unmarshal(d, &m); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec := dig(m, "spec")
	pod := dig(spec, "pytorchReplicaSpecs", "Worker", "template", "spec")
	c := dig(pod, "containers").([]any)[0]
	if dig(spec, "runPolicy", "backoffLimit") != 6.0 || dig(pod, "nodeSelector", "gpu") != "h100" {
		t.Errorf("backoff limit %v, node selector %v", dig(spec, "runPolicy", "backoffLimit"), dig(pod, "nodeSelector"))
	}
	tols := dig(pod, "tolerations").([]any)
	if len(tols) != 2 || dig(tols[0], "operator") != "Exists" || dig(tols[0], "effect") != "NoSchedule" ||
		dig(tols[1], "operator") != "Equal" || dig(tols[1], "value") != "ml" {
		t.Errorf("tolerations %v", tols)
	}
	if dig(c, "resources", "requests", "memory") != "921600Mi" || dig(c, "resources", "limits", "memory") != "921600Mi" {
		t.Errorf("resources %v", dig(c, "resources"))
	}
	var shm any
	for _, v := range dig(pod, "volumes").([]any) {
		if dig(v, "name") == "shm" {
			shm = dig(v, "emptyDir", "sizeLimit")
		}
	}
	if shm != "24576Mi" {
		t.Errorf("/dev/shm %v, want 8 ranks of 3 GiB", shm)
	}
	o.MemPerNode = 0
	b2, _ := Manifest(j, o)
	c2 := dig(docs(t, b2)[1], "spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers").([]any)[0]
	if dig(c2, "resources", "requests", "memory") != "25376Mi" || dig(c2, "resources", "limits", "memory") != nil {
		t.Errorf("without --mem-per-node: %v, want 8 × (100 MiB + 3 GiB) requested", dig(c2, "resources"))
	}
	s := pytorchJobSchema(t)
	if err := s.Validate(pytorchJob(t, b)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", ":NoSchedule", "k:Never"} {
		if _, err := ParseToleration(bad); err == nil {
			t.Errorf("toleration %q taken", bad)
		}
	}
}
