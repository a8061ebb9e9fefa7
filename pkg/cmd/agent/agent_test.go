package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	valid := func() Options {
		return Options{
			NodeName: "n1", DynamicConfigDir: "/var/lib/dkc", KubeletConfig: "/var/lib/kubelet/config.yaml",
			KubeletRootDir: "/var/lib/kubelet", ApplyMode: "replace", Restart: "systemd", SystemdUnit: "kubelet.service",
			RestartTimeout: time.Minute, HealthTimeout: time.Minute, PodReadyTimeout: time.Minute, TrialDuration: 10 * time.Minute,
			MetricsBindAddress: "127.0.0.1:10390", HealthBindAddress: "0", APIServerGracePeriod: time.Minute,
			NodeMonitorGracePeriod: 50 * time.Second,
		}
	}
	tests := map[string]struct {
		edit    func(o *Options)
		wantErr string
	}{
		"valid":             {edit: func(o *Options) {}},
		"no node name":      {edit: func(o *Options) { o.NodeName = "" }, wantErr: "--node-name is required: pass it or set NODE_NAME"},
		"no store dir":      {edit: func(o *Options) { o.DynamicConfigDir = "" }, wantErr: "--dynamic-config-dir is required: the directory of the agent's checkpoint store"},
		"no kubelet config": {edit: func(o *Options) { o.KubeletConfig = "" }, wantErr: "--kubelet-config is required: the kubelet's --config file"},
		"bad apply mode":    {edit: func(o *Options) { o.ApplyMode = "merge" }, wantErr: `--apply-mode must be replace or dropin, got "merge"`},
		"dropin without dir": {
			edit:    func(o *Options) { o.ApplyMode = "dropin" },
			wantErr: "--apply-mode=dropin needs --kubelet-config-dir: the kubelet's --config-dir",
		},
		"dropin with dir": {edit: func(o *Options) { o.ApplyMode = "dropin"; o.KubeletConfigDir = "/etc/kubelet.d" }},
		"bad restart":     {edit: func(o *Options) { o.Restart = "kill" }, wantErr: `--restart must be systemd or exec, got "kill"`},
		"exec without command": {
			edit:    func(o *Options) { o.Restart = "exec" },
			wantErr: "--restart=exec needs --restart-command: a command that restarts the kubelet",
		},
		"stop without start": {
			edit:    func(o *Options) { o.Restart = "exec"; o.RestartCommand = "x"; o.StopCommand = "y" },
			wantErr: "--stop-command and --start-command go together: pass both or neither",
		},
		"kubelet url over http": {
			edit:    func(o *Options) { o.KubeletURL = "http://127.0.0.1:10250" },
			wantErr: `--kubelet-url must be an https URL such as https://127.0.0.1:10250, got "http://127.0.0.1:10250"`,
		},
		"kubelet CA and insecure": {
			edit:    func(o *Options) { o.KubeletCAFile = "/var/lib/kubelet/pki/kubelet.crt"; o.KubeletInsecure = true },
			wantErr: "--kubelet-insecure-skip-tls-verify and --kubelet-certificate-authority exclude each other: pass one",
		},
		"zero health timeout":        {edit: func(o *Options) { o.HealthTimeout = 0 }, wantErr: "--health-timeout must be positive, got 0s"},
		"negative pod ready timeout": {edit: func(o *Options) { o.PodReadyTimeout = -time.Second }, wantErr: "--pod-ready-timeout must be positive, got -1s"},
		"negative trial":             {edit: func(o *Options) { o.TrialDuration = -time.Second }, wantErr: "--trial-duration must not be negative, got -1s"},
		"zero apiserver grace period": {
			edit:    func(o *Options) { o.APIServerGracePeriod = 0 },
			wantErr: "--apiserver-grace-period must be positive, got 0s",
		},
		"probe pod template": {edit: func(o *Options) { o.ProbePodTemplate = "dkc-probe"; o.ProbePodNamespace = "kube-system" }},
		"probe pod template without namespace": {
			edit:    func(o *Options) { o.ProbePodTemplate = "dkc-probe" },
			wantErr: "--probe-pod-template needs --probe-pod-namespace: the namespace of the template and the probe pod",
		},
		"zero node monitor grace period": {
			edit:    func(o *Options) { o.NodeMonitorGracePeriod = 0 },
			wantErr: "--node-monitor-grace-period must be positive, got 0s: kube-controller-manager's value (default 50s)",
		},
		"bad metrics address": {
			edit:    func(o *Options) { o.MetricsBindAddress = "10390" },
			wantErr: `--metrics-bind-address must be host:port (or "0" to disable), got "10390"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := valid()
			tc.edit(&o)
			got := ""
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.wantErr, got); d != "" {
				t.Errorf("Validate() (-want +got):\n%s", d)
			}
		})
	}
}
