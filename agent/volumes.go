package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rootCAConfigMap is the ConfigMap kube publishes the cluster's CA in, in
// every namespace, which ServiceAccount admission projects as ca.crt.
// corekube serves no ConfigMaps: the agent projects the CA it trusts the
// API server with, which is the same certificate.
const rootCAConfigMap = "kube-root-ca.crt"

// Token refresh, as the kubelet's token manager: at 80% of a token's life
// (or after 24 h), less up to 10 s of jitter so that a node's pods do not
// all refresh at once.
const (
	tokenMaxAge     = 24 * time.Hour
	tokenMaxJitter  = 10 * time.Second
	defaultTokenTTL = int64(3600)
)

// mountVolumes materializes the pod's projected volumes in the runtime
// (ServiceAccount tokens, the cluster CA, downward API fields), as the
// kubelet's volume manager does before it starts containers, and refreshes
// their tokens. It returns when a token next needs refreshing (zero: none)
// or, when a volume cannot be set up, the error in the kubelet's words;
// the caller starts no container then.
func (a *Agent) mountVolumes(ctx context.Context, w *podWorker, pod *v1.Pod) (time.Time, error) {
	var next time.Time
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Projected == nil {
			continue
		}
		files, refresh, err := a.projectedFiles(ctx, w, pod, vol.Projected)
		if err != nil {
			return time.Time{}, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", vol.Name, err)
		}
		next = earliest(next, refresh)
		// The runtime keeps the files (and writes nothing when they are
		// as it has them): the worker keeps no copy of its own.
		if err := w.node.runtime.SetVolume(ctx, w.uid, vol.Name, files); err != nil {
			return time.Time{}, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", vol.Name, err)
		}
	}
	return next, nil
}

// projectedFiles computes a projected volume's files and when its tokens
// need refreshing. Sources corekube does not serve (Secrets, ConfigMaps
// other than the root CA, cluster trust bundles) project nothing.
func (a *Agent) projectedFiles(ctx context.Context, w *podWorker, pod *v1.Pod, p *v1.ProjectedVolumeSource) (map[string]string, time.Time, error) {
	files := map[string]string{}
	var next time.Time
	for _, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tr, err := a.podToken(ctx, w, pod, src.ServiceAccountToken)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("failed to fetch token: %w", err)
			}
			files[src.ServiceAccountToken.Path] = tr.token
			next = earliest(next, tr.refreshAt)
		case src.ConfigMap != nil && src.ConfigMap.Name == rootCAConfigMap:
			for _, item := range src.ConfigMap.Items {
				if item.Key == "ca.crt" {
					files[item.Path] = a.clusterCA
				}
			}
			if len(src.ConfigMap.Items) == 0 {
				files["ca.crt"] = a.clusterCA
			}
		case src.DownwardAPI != nil:
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef != nil {
					files[item.Path] = a.podField(pod, item.FieldRef.FieldPath, w)
				}
			}
		}
	}
	return files, next, nil
}

// containerMounts are the container's mounts of the pod volumes the agent
// materializes (projected ones).
func containerMounts(pod *v1.Pod, c *v1.Container) []runtime.Mount {
	var out []runtime.Mount
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == m.Name })
		if i >= 0 && pod.Spec.Volumes[i].Projected != nil {
			out = append(out, runtime.Mount{Volume: m.Name, Path: m.MountPath})
		}
	}
	return out
}

// tokenKey names one token of a pod, as the kubelet's token manager
// keys them: ServiceAccount, audience and lifetime.
type tokenKey struct {
	sa       string
	audience string
	seconds  int64
}

// keyedToken is one token of a pod's worker.
type keyedToken struct {
	key tokenKey
	cachedToken
}

type cachedToken struct {
	token     string
	refreshAt time.Time
	expires   time.Time
}

// podToken returns the pod's token for src: the one the worker keeps while
// it is fresh, else a new one through TokenRequest, bound to the pod. A
// refresh that fails keeps the old token while it is valid, as the
// kubelet's token manager does. The tokens live in the pod's worker and go
// with it.
func (a *Agent) podToken(ctx context.Context, w *podWorker, pod *v1.Pod, src *v1.ServiceAccountTokenProjection) (cachedToken, error) {
	seconds := defaultTokenTTL
	if src.ExpirationSeconds != nil {
		seconds = *src.ExpirationSeconds
	}
	key := tokenKey{sa: pod.Spec.ServiceAccountName, audience: src.Audience, seconds: seconds}
	now := a.clock.Now()
	var cached cachedToken
	i := slices.IndexFunc(w.tokens, func(t keyedToken) bool { return t.key == key })
	ok := i >= 0
	if ok {
		cached = w.tokens[i].cachedToken
	}
	if ok && now.Before(cached.refreshAt) {
		return cached, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := a.clientFor(pod.Spec.NodeName).CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, key.sa, req, metav1.CreateOptions{})
	if err != nil {
		if ok && now.Before(cached.expires) {
			return cached, nil
		}
		return cachedToken{}, err
	}
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(seconds) * time.Second
	if tr.Spec.ExpirationSeconds != nil {
		ttl = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	}
	jitter := time.Duration(rand.Int64N(int64(tokenMaxJitter)))
	refresh := exp.Add(-ttl / 5)
	if maxAge := now.Add(tokenMaxAge); maxAge.Before(refresh) {
		refresh = maxAge
	}
	refresh = refresh.Add(-jitter)
	cached = cachedToken{token: tr.Status.Token, refreshAt: refresh, expires: exp}
	if ok {
		w.tokens[i].cachedToken = cached
	} else {
		w.tokens = append(w.tokens, keyedToken{key, cached})
	}
	return cached, nil
}
