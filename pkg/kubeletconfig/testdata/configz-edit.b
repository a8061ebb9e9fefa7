{
  "kubeReserved": {
    "cpu": "200m",
    "memory": "512Mi"
  },
  "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
  "localStorageCapacityIsolation": true,
  "registerNode": true,
  "memoryThrottlingFactor": 0.9,
  "seccompDefault": false,
  "enableDebugFlagsHandler": true,
  "enableProfilingHandler": true,
  "shutdownGracePeriodCriticalPods": "0s",
  "shutdownGracePeriod": "0s",
  "enableSystemLogHandler": true,
  "logging": {
    "format": "text",
    "flushFrequency": "5s",
    "verbosity": 0,
    "options": {
      "json": {
        "infoBufferSize": "0"
      }
    }
  },
  "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
  "enforceNodeAllocatable": [
    "pods"
  ],
  "configMapAndSecretChangeDetectionStrategy": "Watch",
  "containerLogMaxFiles": 5,
  "containerLogMaxSize": "10Mi",
  "failSwapOn": true,
  "iptablesDropBit": 15,
  "iptablesMasqueradeBit": 14,
  "makeIPTablesUtilChains": true,
  "enableControllerAttachDetach": true,
  "evictionPressureTransitionPeriod": "5m0s",
  "evictionHard": {
    "imagefs.available": "15%",
    "memory.available": "500Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%"
  },
  "serializeImagePulls": false,
  "kubeAPIBurst": 100,
  "kubeAPIQPS": 50,
  "contentType": "application/vnd.kubernetes.protobuf",
  "maxOpenFiles": 1000000,
  "nodeStatusMaxImages": 50,
  "cpuCFSQuotaPeriod": "100ms",
  "cpuCFSQuota": true,
  "resolvConf": "/run/systemd/resolve/resolv.conf",
  "maxPods": 250,
  "hairpinMode": "promiscuous-bridge",
  "runtimeRequestTimeout": "2m0s",
  "topologyManagerScope": "container",
  "topologyManagerPolicy": "none",
  "memoryManagerPolicy": "None",
  "cpuManagerReconcilePeriod": "10s",
  "cpuManagerPolicy": "none",
  "cgroupDriver": "systemd",
  "cgroupsPerQOS": true,
  "volumeStatsAggPeriod": "1m0s",
  "imageGCLowThresholdPercent": 80,
  "imageGCHighThresholdPercent": 85,
  "imageMinimumGCAge": "2m0s",
  "nodeLeaseDurationSeconds": 40,
  "nodeStatusReportFrequency": "5m0s",
  "nodeStatusUpdateFrequency": "10s",
  "streamingConnectionIdleTimeout": "4h0m0s",
  "clusterDNS": [
    "10.96.0.10"
  ],
  "clusterDomain": "cluster.local",
  "oomScoreAdj": -999,
  "healthzBindAddress": "127.0.0.1",
  "healthzPort": 10248,
  "enableDebuggingHandlers": true,
  "eventBurst": 100,
  "eventRecordQPS": 50,
  "registryBurst": 10,
  "registryPullQPS": 5,
  "authorization": {
    "mode": "Webhook",
    "webhook": {
      "cacheAuthorizedTTL": "5m0s",
      "cacheUnauthorizedTTL": "30s"
    }
  },
  "authentication": {
    "x509": {
      "clientCAFile": "/etc/kubernetes/pki/ca.crt"
    },
    "webhook": {
      "enabled": true,
      "cacheTTL": "2m0s"
    },
    "anonymous": {
      "enabled": false
    }
  },
  "tlsPrivateKeyFile": "/var/lib/kubelet/pki/kubelet.key",
  "tlsCertFile": "/var/lib/kubelet/pki/kubelet.crt",
  "port": 10250,
  "address": "0.0.0.0",
  "httpCheckFrequency": "20s",
  "fileCheckFrequency": "20s",
  "syncFrequency": "1m0s",
  "staticPodPath": "/etc/kubernetes/manifests",
  "enableServer": true,
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "kind": "KubeletConfiguration"
}
