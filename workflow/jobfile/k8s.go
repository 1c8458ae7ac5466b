package jobfile

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"pipe/planner/plan"
)

// K8s is what a PyTorchJob needs beyond the plan.
type K8s struct {
	// Name is the job's name, and its ConfigMap's with "-pipe" after it
	// (default: the pipeline's); Namespace "" for the context's.
	Name, Namespace string
	// Image is the container image: pipe on its PATH, and the torch
	// engine's Python with torchrun.
	Image string
	// WorkDir is the container's working directory, where the file's
	// relative data paths resolve (default /workspace).
	WorkDir string
	// DataClaim and CheckpointClaim are PersistentVolumeClaims mounted at
	// DataPath (read-only; default WORKDIR/data) and CheckpointPath
	// (default WORKDIR/out, where pipe run writes its run folders), ""
	// for none. Checkpoints need one so that a restarted pod resumes.
	DataClaim, DataPath             string
	CheckpointClaim, CheckpointPath string
	// Elastic asks for an elastic job of MinNodes to MaxNodes pods
	// (elasticPolicy, c10d rendezvous), restarted at most MaxRestarts
	// times.
	Elastic            bool
	MinNodes, MaxNodes int
	MaxRestarts        int
	RunArgs            []string
	// BackoffLimit is how often the operator restarts the job's pods
	// before it marks the job failed (runPolicy.backoffLimit); nil for
	// the operator's default.
	BackoffLimit *int
	// NodeSelector and Tolerations go to every pod as written, to place
	// it on the cluster's GPU nodes.
	NodeSelector map[string]string
	Tolerations  []Toleration
	// MemPerNode is the memory a pod asks for (requests and limits), 0
	// for what the plan knows it needs: its loader's buffers and its
	// shared memory, a request alone.
	MemPerNode int64
	// ShmBytes is one rank's /dev/shm (torch.SharedMemoryBytes); the
	// pod's memory-backed /dev/shm holds NProcPerNode of them. 0 leaves
	// it unsized.
	ShmBytes int64
}

// Toleration is a pod's toleration of a node's taint.
type Toleration struct {
	Key, Value, Effect string
}

// ParseToleration reads --toleration's KEY[=VALUE][:EFFECT]: operator
// Equal with a value, Exists without; no effect tolerates them all.
func ParseToleration(s string) (Toleration, error) {
	kv, effect, _ := strings.Cut(s, ":")
	k, v, _ := strings.Cut(kv, "=")
	switch effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return Toleration{}, fmt.Errorf("%q: the effect is NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	if k == "" {
		return Toleration{}, fmt.Errorf("%q: give KEY[=VALUE][:EFFECT], such as nvidia.com/gpu:NoSchedule", s)
	}
	return Toleration{Key: k, Value: v, Effect: effect}, nil
}

func (t Toleration) object() object {
	o := object{"key": t.Key, "operator": "Exists"}
	if t.Value != "" {
		o["operator"], o["value"] = "Equal", t.Value
	}
	if t.Effect != "" {
		o["effect"] = t.Effect
	}
	return o
}

// ConfigDir is where the pods see the ConfigMap: the .pipe file and
// plan.json.
const ConfigDir = "/etc/pipe"

// Annotations on the job and its ConfigMap.
const (
	AnnotationPlan   = "pipe.dev/plan-sha256"
	AnnotationSource = "pipe.dev/source-sha256"
)

type object = map[string]any

// Manifest is a multi-document YAML: a ConfigMap holding the .pipe file
// and its plan, and a Kubeflow PyTorchJob (kubeflow.org/v1) whose pods
// mount it and run torchrun, which reads the PET_* variables the training
// operator sets (nodes, node rank, master) and starts NProcPerNode pipe
// processes a pod; each reads its rank from torchrun's variables. Master
// 1 and Worker N−1 replicas, or with Elastic Worker replicas alone and
// an elasticPolicy.
func Manifest(j *Job, o K8s) ([]byte, error) {
	p := j.Plan
	name := o.Name
	if name == "" {
		name = Name(p.Pipeline)
	}
	src := path.Base(j.SourceName)
	ann := object{AnnotationPlan: SHA256(j.PlanJSON), AnnotationSource: p.SourceSHA256}
	meta := func(n string) object {
		m := object{"name": n, "annotations": ann, "labels": object{"app.kubernetes.io/name": "pipe", "pipe.dev/pipeline": Name(p.Pipeline)}}
		if o.Namespace != "" {
			m["namespace"] = o.Namespace
		}
		return m
	}
	cm := object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name + "-pipe"),
		"data": object{src: string(j.Source), "plan.json": string(j.PlanJSON)}}
	job := object{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta(name), "spec": jobSpec(p, o, name, src, ann)}
	var b bytes.Buffer
	b.WriteString("# Written by pipe launch; run it again rather than editing this file.\n")
	for _, s := range j.Summary() {
		fmt.Fprintf(&b, "# %s\n", s)
	}
	if o.CheckpointClaim != "" && max(p.Distributed.NNodes, 1) > 1 {
		fmt.Fprintf(&b, "# The claim %s must be ReadWriteMany: every node's pod mounts it, and a restarted pod may start on another node.\n", o.CheckpointClaim)
	}
	for i, doc := range []object{cm, job} {
		y, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

func jobSpec(p *plan.Plan, o K8s, name, src string, ann object) object {
	d := p.Distributed
	nodes, nproc := max(d.NNodes, 1), max(d.NProcPerNode, 1)
	pod := podTemplate(p, o, name, src, nproc, ann)
	replica := func(n int) object {
		return object{"replicas": n, "restartPolicy": "OnFailure", "template": pod}
	}
	run := object{"cleanPodPolicy": "None"}
	if o.BackoffLimit != nil {
		run["backoffLimit"] = *o.BackoffLimit
	}
	spec := object{"nprocPerNode": strconv.Itoa(nproc), "runPolicy": run}
	if o.Elastic {
		spec["elasticPolicy"] = object{"rdzvBackend": "c10d", "minReplicas": o.MinNodes, "maxReplicas": o.MaxNodes, "maxRestarts": o.MaxRestarts}
		spec["pytorchReplicaSpecs"] = object{"Worker": replica(nodes)}
		return spec
	}
	reps := object{"Master": replica(1)}
	if nodes > 1 {
		reps["Worker"] = replica(nodes - 1)
	}
	spec["pytorchReplicaSpecs"] = reps
	return spec
}

func podTemplate(p *plan.Plan, o K8s, name, src string, nproc int, ann object) object {
	wd := o.WorkDir
	if wd == "" {
		wd = "/workspace"
	}
	cmd := append([]any{"torchrun", "--no_python", "pipe", "run", "--plan", ConfigDir + "/plan.json"}, anys(o.RunArgs)...)
	cmd = append(cmd, ConfigDir+"/"+src)
	shm := object{"medium": "Memory"}
	if o.ShmBytes > 0 {
		shm["sizeLimit"] = quantity(int64(nproc) * o.ShmBytes)
	}
	mounts := []any{object{"name": "pipe", "mountPath": ConfigDir, "readOnly": true}, object{"name": "shm", "mountPath": "/dev/shm"}}
	volumes := []any{object{"name": "pipe", "configMap": object{"name": name + "-pipe"}}, object{"name": "shm", "emptyDir": shm}}
	claim := func(vol, claim, at, def string, ro bool) {
		if claim == "" {
			return
		}
		if at == "" {
			at = path.Join(wd, def)
		}
		mounts = append(mounts, object{"name": vol, "mountPath": at, "readOnly": ro})
		volumes = append(volumes, object{"name": vol, "persistentVolumeClaim": object{"claimName": claim, "readOnly": ro}})
	}
	claim("data", o.DataClaim, o.DataPath, "data", true)
	claim("checkpoints", o.CheckpointClaim, o.CheckpointPath, "out", false)
	c := object{"name": "pytorch", "image": o.Image, "workingDir": wd, "command": cmd, "resources": resources(p, o, nproc),
		"volumeMounts": mounts, "env": jobEnv()}
	spec := object{"containers": []any{c}, "volumes": volumes}
	if len(o.NodeSelector) > 0 {
		spec["nodeSelector"] = o.NodeSelector
	}
	for _, t := range o.Tolerations {
		ts, _ := spec["tolerations"].([]any)
		spec["tolerations"] = append(ts, t.object())
	}
	return object{"metadata": object{"annotations": ann}, "spec": spec}
}

// resources are a pod's requests and limits: the CPUs its ranks and
// their loader workers use, its GPUs, and its memory: MemPerNode when
// given (requested and the limit), else what the plan knows a pod needs,
// requested alone: on the CPU its ranks' totals, on a GPU their loader
// buffers and the memory-backed /dev/shm, which counts against the pod's
// memory.
func resources(p *plan.Plan, o K8s, nproc int) object {
	req := object{"cpu": strconv.Itoa(nproc * (p.Loader.Workers + 1))}
	lim := object{}
	mem := int64(nproc) * (p.Loader.BufferBytes + o.ShmBytes)
	if p.Backend != plan.BackendGPU {
		mem = int64(nproc) * p.Memory.Total
	} else {
		lim["nvidia.com/gpu"] = nproc
	}
	if o.MemPerNode > 0 {
		mem = o.MemPerNode
		lim["memory"] = quantity(mem)
	}
	if mem > 0 {
		req["memory"] = quantity(mem)
	}
	res := object{"requests": req}
	if len(lim) > 0 {
		res["limits"] = lim
	}
	return res
}

// quantity is bytes as a Kubernetes quantity, in whole MiB rounded up.
func quantity(bytes int64) string {
	return strconv.FormatInt((bytes+(1<<20)-1)>>20, 10) + "Mi"
}

// JobNameLabel is the label the training operator puts on a
// PyTorchJob's pods, holding the job's name (kubeflow/common's
// JobNameLabel).
const JobNameLabel = "training.kubeflow.org/job-name"

// jobEnv passes the job's name and namespace to the container from the
// pod's label and metadata (the downward API), as PIPE_JOB_NAME and
// PIPE_JOB_NAMESPACE: pipe run names the run pytorchjob-NAMESPACE-NAME
// by them, so that a restarted container, whose torchrun counts no
// restart, continues the job's run (workflow.JobOf).
func jobEnv() []any {
	field := func(name, path string) object {
		return object{"name": name, "valueFrom": object{"fieldRef": object{"fieldPath": path}}}
	}
	return []any{field("PIPE_JOB_NAME", "metadata.labels['"+JobNameLabel+"']"), field("PIPE_JOB_NAMESPACE", "metadata.namespace")}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// ParseClaim reads --data-pvc's and --checkpoint-pvc's CLAIM[:PATH].
func ParseClaim(s string) (claim, at string, err error) {
	claim, at, _ = strings.Cut(s, ":")
	if claim == "" || Name(claim) != claim || (at != "" && !path.IsAbs(at)) {
		return "", "", fmt.Errorf("%q: give a claim's name, and after a colon an absolute path to mount it at (data:/workspace/data)", s)
	}
	return claim, at, nil
}

// ParseElastic reads --elastic's MIN:MAX nodes.
func ParseElastic(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi < lo {
		return 0, 0, fmt.Errorf("%q: give the least and the most nodes, as in 2:4", s)
	}
	return lo, hi, nil
}

// Check says what keeps o from running p, nil when nothing: an image is
// needed, and an elastic range must hold the plan's nodes.
func (o *K8s) Check(p *plan.Plan) error {
	n := max(p.Distributed.NNodes, 1)
	switch {
	case o.Image == "":
		return fmt.Errorf("--k8s needs --image: a container image with pipe on its PATH and the torch engine's Python (torchrun)")
	case o.Elastic && (n < o.MinNodes || n > o.MaxNodes):
		return fmt.Errorf("--elastic %d:%d does not hold the plan's %d nodes (--nnodes)", o.MinNodes, o.MaxNodes, n)
	}
	return nil
}
