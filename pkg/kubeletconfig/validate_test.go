package kubeletconfig

import (
	"errors"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// newConfig returns a valid config, changed by each option.
func newConfig(opts ...func(*kubeletconfigv1beta1.KubeletConfiguration)) *kubeletconfigv1beta1.KubeletConfiguration {
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta:                    typeMeta,
		MaxPods:                     110,
		Port:                        10250,
		HealthzPort:                 ptr.To[int32](10248),
		CgroupDriver:                "systemd",
		ImageGCHighThresholdPercent: ptr.To[int32](85),
		ImageGCLowThresholdPercent:  ptr.To[int32](80),
		EvictionHard:                map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		Authorization:               kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
	}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

func TestValidate(t *testing.T) {
	type cfg = kubeletconfigv1beta1.KubeletConfiguration
	tests := map[string]struct {
		cfg     *cfg
		wantErr string
	}{
		"valid": {
			cfg: newConfig(),
		},
		"empty config is valid": {
			cfg: &cfg{},
		},
		"every known policy value": {
			cfg: newConfig(func(c *cfg) {
				c.CgroupDriver = "cgroupfs"
				c.CPUManagerPolicy = "static"
				c.MemoryManagerPolicy = "Static"
				c.TopologyManagerPolicy = "single-numa-node"
				c.Authorization.Mode = "AlwaysAllow"
			}),
		},
		"ports at the edges": {
			cfg: newConfig(func(c *cfg) { c.Port, c.ReadOnlyPort, c.HealthzPort = 65535, 0, ptr.To[int32](0) }),
		},
		"eviction 0% and 100% disable a signal": {
			cfg: newConfig(func(c *cfg) {
				c.EvictionHard = map[string]string{"memory.available": "0%", "nodefs.available": "100%"}
				c.EvictionSoft = map[string]string{"memory.available": "12.5%", "imagefs.available": "2Gi"}
				c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
			}),
		},
		"cgroupsPerQOS false with enforcement off": {
			cfg: newConfig(func(c *cfg) { c.CgroupsPerQOS = ptr.To(false); c.EnforceNodeAllocatable = []string{"none"} }),
		},
		"cgroupsPerQOS false with an explicit empty list": {
			cfg: newConfig(func(c *cfg) { c.CgroupsPerQOS = ptr.To(false); c.EnforceNodeAllocatable = []string{} }),
		},
		"cgroupsPerQOS false, enforceNodeAllocatable absent": {
			cfg:     newConfig(func(c *cfg) { c.CgroupsPerQOS = ptr.To(false) }),
			wantErr: "validate kubelet config: enforceNodeAllocatable: absent, so the kubelet enforces the default [pods], which needs cgroupsPerQOS: true; set it explicitly (for example [none] on kubelet 1.24+, [] on older ones): /configz leaves out an empty list",
		},
		"cgroupsPerQOS false, enforcing pods": {
			cfg:     newConfig(func(c *cfg) { c.CgroupsPerQOS = ptr.To(false); c.EnforceNodeAllocatable = []string{"pods"} }),
			wantErr: `validate kubelet config: enforceNodeAllocatable: must not contain "pods" when cgroupsPerQOS is false`,
		},
		"nil config": {
			cfg:     nil,
			wantErr: "validate kubelet config: config is nil",
		},
		"negative maxPods": {
			cfg:     newConfig(func(c *cfg) { c.MaxPods = -1 }),
			wantErr: "validate kubelet config: maxPods: must be >= 0, got -1",
		},
		"negative podsPerCore": {
			cfg:     newConfig(func(c *cfg) { c.PodsPerCore = -2 }),
			wantErr: "validate kubelet config: podsPerCore: must be >= 0, got -2",
		},
		"ports out of range": {
			cfg: newConfig(func(c *cfg) { c.Port, c.ReadOnlyPort, c.HealthzPort = 65536, -1, ptr.To[int32](70000) }),
			wantErr: "validate kubelet config: port: must be between 0 and 65535, got 65536; " +
				"readOnlyPort: must be between 0 and 65535, got -1; " +
				"healthzPort: must be between 0 and 65535, got 70000",
		},
		"eviction thresholds": {
			cfg: newConfig(func(c *cfg) {
				c.EvictionHard = map[string]string{"memory.available": "110%", "nodefs.available": "ten%", "nodefs.inodesFree": "-5%"}
				c.EvictionSoft = map[string]string{"memory.available": "lots", "imagefs.available": "0", "pid.available": "-1"}
			}),
			wantErr: `validate kubelet config: evictionHard["memory.available"]: must be a percentage between 0% and 100%, got "110%"; ` +
				`evictionHard["nodefs.available"]: must be a percentage between 0% and 100%, got "ten%"; ` +
				`evictionHard["nodefs.inodesFree"]: must be a percentage between 0% and 100%, got "-5%"; ` +
				`evictionSoft["imagefs.available"]: must be a positive quantity, got "0"; ` +
				`evictionSoft["memory.available"]: must be a quantity or a percentage, got "lots"; ` +
				`evictionSoft["pid.available"]: must be a positive quantity, got "-1"`,
		},
		"eviction soft grace period": {
			cfg:     newConfig(func(c *cfg) { c.EvictionSoftGracePeriod = map[string]string{"memory.available": "90"} }),
			wantErr: `validate kubelet config: evictionSoftGracePeriod["memory.available"]: must be a duration, got "90"`,
		},
		"image gc high below low": {
			cfg: newConfig(func(c *cfg) {
				c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](70), ptr.To[int32](80)
			}),
			wantErr: "validate kubelet config: imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent 70, got 80",
		},
		"image gc high equal to low, which the kubelet also refuses": {
			cfg: newConfig(func(c *cfg) {
				c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](80), ptr.To[int32](80)
			}),
			wantErr: "validate kubelet config: imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent 80, got 80",
		},
		"image gc low alone, above the default high": {
			cfg:     newConfig(func(c *cfg) { c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = nil, ptr.To[int32](90) }),
			wantErr: "validate kubelet config: imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent 85 (default), got 90",
		},
		"image gc high alone, below the default low": {
			cfg:     newConfig(func(c *cfg) { c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](50), nil }),
			wantErr: "validate kubelet config: imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent 50, got 80 (default)",
		},
		"image gc out of range": {
			cfg: newConfig(func(c *cfg) {
				c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = ptr.To[int32](101), ptr.To[int32](-1)
			}),
			wantErr: "validate kubelet config: imageGCHighThresholdPercent: must be between 0 and 100, got 101; " +
				"imageGCLowThresholdPercent: must be between 0 and 100, got -1",
		},
		"policies": {
			cfg: newConfig(func(c *cfg) {
				c.CgroupDriver = "Systemd"
				c.CPUManagerPolicy = "Static"
				c.MemoryManagerPolicy = "static"
				c.TopologyManagerPolicy = "besteffort"
				c.Authorization.Mode = "RBAC"
			}),
			wantErr: `validate kubelet config: cgroupDriver: must be unset or one of cgroupfs, systemd, got "Systemd"; ` +
				`cpuManagerPolicy: must be unset or one of none, static, got "Static"; ` +
				`memoryManagerPolicy: must be unset or one of None, Static, got "static"; ` +
				`topologyManagerPolicy: must be unset or one of none, best-effort, restricted, single-numa-node, got "besteffort"; ` +
				`authorization.mode: must be unset or one of AlwaysAllow, Webhook, got "RBAC"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() succeeded, want error %q", tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("Validate() error:\n got: %s\nwant: %s", err, tc.wantErr)
			}
			if !errors.Is(err, ErrValidate) {
				t.Errorf("Validate() error does not wrap ErrValidate: %v", err)
			}
		})
	}
}
