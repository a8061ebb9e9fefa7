kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
maxPods: 50
