package planner

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"

	"pipe/diag"
	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// Devices lists every device a plan can be made for, in the order `pipe
// devices` prints them: the local CPU, the local GPUs (cuda:N), the
// built-in profiles, then the device blocks of prog (which may be nil).
func Devices(prog *spec.Program, host HostInfo) []plan.Device {
	out := []plan.Device{host.cpuDevice()}
	for i := range host.GPUs {
		out = append(out, localGPU(host, i))
	}
	for _, p := range stdlib.Devices() {
		out = append(out, fromProfile(p, host))
	}
	if prog != nil {
		for _, d := range prog.Devices {
			out = append(out, fromBlock(d, host))
		}
	}
	return out
}

// fromProfile turns a built-in profile into a plan.Device on the given host.
func fromProfile(p *stdlib.DeviceProfile, host HostInfo) plan.Device {
	d := plan.Device{Name: p.Name, Kind: p.Kind, Origin: "profile", Doc: p.Doc, Memory: p.Memory,
		Bandwidth: p.Bandwidth, Peaks: p.Peaks,
		HasBF16: p.SupportsBF16, HasTF32: p.SupportsTF32, Capability: p.Capability, Link: p.Link, LinkName: p.LinkName,
		L2: p.L2, Cores: host.Cores, HostMemory: host.MemTotal}
	if p.Kind == plan.BackendCPU {
		d.Cores, d.HostMemory = p.Cores, p.HostMemory
	}
	return d
}

// localGPU is GPU i of the host: its free memory, and the peaks of the
// built-in profile its name matches (none when it matches none).
func localGPU(host HostInfo, i int) plan.Device {
	g := host.GPUs[i]
	d := plan.Device{Name: fmt.Sprintf("cuda:%d", i), Kind: plan.BackendGPU, Origin: "local",
		Doc: g.Name + ", free memory as nvidia-smi reports it", Memory: g.MemFree,
		Cores: host.Cores, HostMemory: host.MemTotal}
	if p := matchProfile(g.Name, g.MemTotal); p != nil {
		d.Bandwidth, d.Peaks = p.Bandwidth, p.Peaks
		d.HasBF16, d.HasTF32, d.Capability = p.SupportsBF16, p.SupportsTF32, p.Capability
		d.Link, d.LinkName, d.L2 = p.Link, p.LinkName, p.L2
		d.Doc += "; peaks of the " + p.Name + " profile"
	} else {
		d.Doc += "; no built-in profile matches its name, so its peaks are unknown"
	}
	return d
}

// matchProfile finds the built-in profile an nvidia-smi name describes,
// such as "NVIDIA A100-SXM4-80GB" or "Tesla T4".
func matchProfile(name string, memTotal int64) *stdlib.DeviceProfile {
	n := strings.ToLower(name)
	big := memTotal > 48<<30
	pick := func(small, large string) *stdlib.DeviceProfile {
		if big {
			return stdlib.Device(large)
		}
		return stdlib.Device(small)
	}
	switch {
	case strings.Contains(n, "a100"):
		return pick("a100-40gb", "a100-80gb")
	case strings.Contains(n, "h100"):
		return stdlib.Device("h100-80gb")
	case strings.Contains(n, "h200"):
		return stdlib.Device("h200-141gb")
	case strings.Contains(n, "v100"):
		return pick("v100-16gb", "v100-32gb")
	case strings.Contains(n, "4090"):
		return stdlib.Device("rtx4090-24gb")
	case strings.Contains(n, "3090"):
		return stdlib.Device("rtx3090-24gb")
	case strings.Contains(n, " t4") || strings.HasPrefix(n, "t4"):
		return stdlib.Device("t4-16gb")
	case strings.Contains(n, " l4") || strings.HasPrefix(n, "l4"):
		return stdlib.Device("l4-24gb")
	}
	return nil
}

// fromBlock turns a device block into a plan.Device.
func fromBlock(b *spec.Device, host HostInfo) plan.Device {
	d := plan.Device{Name: b.Name, Kind: plan.BackendGPU, Origin: "file",
		Doc: fmt.Sprintf("device block at line %d", b.At.KindRange.Start.Line), Cores: host.Cores, HostMemory: host.MemTotal,
		Memory: b.Memory, Bandwidth: b.Bandwidth, Peaks: spec.Peaks{FP32: b.FP32, TF32: b.TF32, FP16: b.FP16, BF16: b.BF16}}
	if b.Kind != "" {
		d.Kind = b.Kind
	}
	d.HasBF16, d.HasTF32 = d.BF16 > 0, d.TF32 > 0
	if b.At.Has("cores") {
		d.Cores = int(b.Cores)
	}
	if b.At.Has("host_memory") {
		d.HostMemory = b.HostMemory
	}
	return d
}

// resolveDevice finds the device a plan is for: the --device flag's name
// when given, else the file's device field, else auto. at is where the
// name was written (nil for the flag).
func resolveDevice(prog *spec.Program, name string, at *diag.Range, host HostInfo) (plan.Device, string, diag.Diagnostics) {
	why := "the file's device field"
	if at == nil {
		why = "the --device flag"
	}
	switch {
	case name == "" || name == "auto":
		if len(host.GPUs) > 0 {
			return localGPU(host, 0), "device auto: nvidia-smi lists a GPU, so the first one (cuda:0)", nil
		}
		return host.cpuDevice(), "device auto: no GPU found (nvidia-smi is absent or lists none), so the CPU", nil
	case name == "cpu":
		return host.cpuDevice(), "cpu, from " + why, nil
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		i := 0
		if name != "cuda" {
			n, err := strconv.Atoi(strings.TrimPrefix(name, "cuda:"))
			if err != nil || n < 0 {
				return plan.Device{}, "", unknownDevice(prog, name, at, host)
			}
			i = n
		}
		if i >= len(host.GPUs) {
			d := diag.Diagnostic{Severity: diag.Error, Code: "no-gpu", Subject: at,
				Summary: fmt.Sprintf("no GPU %s on this machine", name),
				Detail: fmt.Sprintf("nvidia-smi lists %d GPUs here. To plan for a GPU you do not have, name its profile instead (pipe devices lists them), such as --device a100-80gb.",
					len(host.GPUs))}
			return plan.Device{}, "", diag.Diagnostics{&d}
		}
		return localGPU(host, i), name + ", from " + why, nil
	}
	if prog != nil {
		if b := prog.DeviceNamed(name); b != nil {
			return fromBlock(b, host), fmt.Sprintf("%s, the device block at line %d, from %s", name, b.At.KindRange.Start.Line, why), nil
		}
	}
	if p := stdlib.Device(name); p != nil {
		return fromProfile(p, host), fmt.Sprintf("%s, a built-in profile, from %s", name, why), nil
	}
	return plan.Device{}, "", unknownDevice(prog, name, at, host)
}

func unknownDevice(prog *spec.Program, name string, at *diag.Range, host HostInfo) diag.Diagnostics {
	var known []string
	for _, d := range Devices(prog, host) {
		known = append(known, d.Name)
	}
	known = append(known, "auto")
	sort.Strings(known)
	detail := fmt.Sprintf("Device %s is neither a built-in profile, a device block of this file, cpu, cuda:N nor auto. pipe devices lists them: %s.",
		quote(name), strings.Join(known, ", "))
	d := &diag.Diagnostic{Severity: diag.Error, Code: "unknown-device", Subject: at,
		Summary: fmt.Sprintf("unknown device %s", quote(name))}
	if s := nearest(name, known); s != "" {
		detail = fmt.Sprintf("Did you mean %s? ", quote(s)) + detail
		d.Suggestion = s
	}
	d.Detail = detail
	return diag.Diagnostics{d}
}

func quote(s string) string { return "'" + s + "'" }

// nearest returns the candidate closest to name by edit distance, or ""
// when none is close enough to be a likely typo.
func nearest(name string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(name, c)
		if best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}
