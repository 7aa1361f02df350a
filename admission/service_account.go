package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// ServiceAccount admission constants, kube's values.
const (
	// DefaultServiceAccountName is the ServiceAccount of a pod that names
	// none.
	DefaultServiceAccountName = "default"
	// ServiceAccountVolumePrefix starts the name of the projected volume
	// the token is mounted from; a random 5-character suffix follows.
	ServiceAccountVolumePrefix = "kube-api-access-"
	// ServiceAccountTokenMountPath is where every container finds the
	// token, the namespace and the cluster CA.
	ServiceAccountTokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountTokenExpirationSeconds is the lifetime the projected
	// token asks for: kube's one hour and seven seconds, which its API
	// server recognises as an automounted token (legacy clients that do
	// not reread the file keep working longer than an hour).
	ServiceAccountTokenExpirationSeconds = 3607
	// RootCAConfigMap is the ConfigMap holding the cluster CA that the
	// projected volume names.
	RootCAConfigMap = "kube-root-ca.crt"
	// MirrorPodAnnotation marks a static pod's mirror, which the kubelet
	// made from a file and which must not be changed.
	MirrorPodAnnotation = "kubernetes.io/config.mirror"
	// EnforceMountableSecretsAnnotation on a ServiceAccount ("true")
	// limits its pods to the secrets it lists.
	EnforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"
	// defaultServiceAccountWait bounds the wait for a missing default
	// ServiceAccount.
	defaultServiceAccountWait = 2 * time.Second
	// serviceAccountPoll is how often that wait looks again.
	serviceAccountPoll = 100 * time.Millisecond
)

// ServiceAccountGetter looks a ServiceAccount up; it returns a NotFound
// Status error when it does not exist. The returned object is not changed.
type ServiceAccountGetter func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)

// ServiceAccount is kube's ServiceAccount admission plugin for pod
// creations: a pod without serviceAccountName gets "default"; its
// ServiceAccount must exist (403 otherwise); unless the pod or the
// ServiceAccount opt out (automountServiceAccountToken), a projected
// "kube-api-access-*" volume with a bound token, the cluster CA and the
// namespace is added and mounted read-only at ServiceAccountTokenMountPath
// in every container and init container that mounts nothing there; a pod
// without imagePullSecrets gets the ServiceAccount's. Mirror pods are not
// changed and may not use ServiceAccounts or secrets.
type ServiceAccount struct {
	Get ServiceAccountGetter
	// DefaultWait is how long a pod waits for a missing default
	// ServiceAccount, which the ServiceAccounts controller is likely about
	// to create in a new namespace (kube retries a live lookup for it
	// about as long); 0 is 2s. Other names are looked up once.
	DefaultWait time.Duration
}

var (
	_ Mutator   = (*ServiceAccount)(nil)
	_ Validator = (*ServiceAccount)(nil)
)

var podsResource = schema.GroupResource{Resource: "pods"}

// serviceAccountPod returns the pod a write creates, nil when the plugin
// has nothing to do with the write (other resources, subresources,
// updates: a pod's serviceAccountName and volumes are immutable).
func serviceAccountPod(a *Attributes) *v1.Pod {
	if a.Resource.Group != "" || a.Resource.Resource != "pods" || a.Subresource != "" || a.Operation != Create {
		return nil
	}
	pod, _ := a.Object.(*v1.Pod)
	return pod
}

// serviceAccountTarget is the start Admit and Validate share: the pod the
// plugin works on, or done with the answer when there is none or it is a
// mirror pod. The kubelet deletes a mirror pod whose spec differs from its
// file, so such a pod is refused for what it may not use, never changed.
func serviceAccountTarget(a *Attributes) (pod *v1.Pod, done bool, err error) {
	pod = serviceAccountPod(a)
	if pod == nil {
		return nil, true, nil
	}
	if isMirrorPod(pod) {
		return nil, true, checkMirrorPod(a, pod)
	}
	return pod, false, nil
}

func isMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[MirrorPodAnnotation]
	return ok
}

// Admit implements Mutator.
func (p *ServiceAccount) Admit(ctx context.Context, a *Attributes) error {
	pod, done, err := serviceAccountTarget(a)
	if done {
		return err
	}
	// The admission chain runs before the v1 conversion folds the
	// deprecated serviceAccount into serviceAccountName; kube's plugin
	// sees the folded value.
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = pod.Spec.DeprecatedServiceAccount
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName

	sa, err := p.lookup(ctx, a, pod)
	if err != nil {
		return err
	}
	if automount(sa, pod) {
		mountServiceAccountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = make([]v1.LocalObjectReference, len(sa.ImagePullSecrets))
		for i, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets[i] = v1.LocalObjectReference{Name: s.Name}
		}
	}
	return nil
}

// Validate implements Validator: after every mutation the pod still names
// an existing ServiceAccount (and uses only the secrets it allows when it
// enforces that), and a mirror pod still uses none.
func (p *ServiceAccount) Validate(ctx context.Context, a *Attributes) error {
	pod, done, err := serviceAccountTarget(a)
	if done {
		return err
	}
	if pod.Spec.ServiceAccountName == "" {
		return forbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	sa, err := p.lookup(ctx, a, pod)
	if err != nil {
		return err
	}
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return forbidden(a, err)
		}
	}
	return nil
}

// lookup returns the pod's ServiceAccount or kube's 403. A missing default
// ServiceAccount is waited for a little (polling p.Get, which reads the
// watch cache and, on a miss, etcd); any other is looked up once.
func (p *ServiceAccount) lookup(ctx context.Context, a *Attributes, pod *v1.Pod) (*v1.ServiceAccount, error) {
	name := pod.Spec.ServiceAccountName
	sa, err := p.Get(ctx, a.Namespace, name)
	if apierrors.IsNotFound(err) && name == DefaultServiceAccountName {
		sa, err = p.waitFor(ctx, a.Namespace, name)
	}
	if apierrors.IsNotFound(err) {
		// kube's message names the resource in the singular.
		err = apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
	}
	if err != nil {
		return nil, forbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, name, err))
	}
	return sa, nil
}

// waitFor polls for the ServiceAccount until it exists, DefaultWait has
// passed or ctx ends; it returns the last answer.
func (p *ServiceAccount) waitFor(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	wait := p.DefaultWait
	if wait <= 0 {
		wait = defaultServiceAccountWait
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(serviceAccountPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
		case <-deadline.C:
			return p.Get(ctx, namespace, name)
		case <-tick.C:
		}
		sa, err := p.Get(ctx, namespace, name)
		if !apierrors.IsNotFound(err) {
			return sa, err
		}
	}
}

// forbidden is kube's admission.NewForbidden for a pod: 403 naming the
// pod (its generated name when it has one).
func forbidden(a *Attributes, err error) error {
	return apierrors.NewForbidden(podsResource, a.Name, err)
}

// automount reports whether the token is mounted: the pod's choice, else
// the ServiceAccount's, else yes.
func automount(sa *v1.ServiceAccount, pod *v1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountServiceAccountToken mounts the token volume in every init container
// and container that has nothing at ServiceAccountTokenMountPath yet, and
// adds the volume when one of them mounts it and the pod has no
// kube-api-access volume already. Ephemeral containers are left alone, as
// kube leaves them.
func mountServiceAccountToken(pod *v1.Pod) {
	name, hasVolume := "", false
	for _, vol := range pod.Spec.Volumes {
		if strings.HasPrefix(vol.Name, ServiceAccountVolumePrefix) {
			name, hasVolume = vol.Name, true
			break
		}
	}
	if name == "" {
		// kube's SimpleNameGenerator: 5 random alphanumerics.
		name = ServiceAccountVolumePrefix + utilrand.String(5)
	}
	mount := v1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountTokenMountPath}
	needed := false
	addTo := func(containers []v1.Container) {
		for i := range containers {
			c := &containers[i]
			if !mountsTokenPath(c.VolumeMounts) {
				c.VolumeMounts = append(c.VolumeMounts, mount)
				needed = true
			}
		}
	}
	addTo(pod.Spec.InitContainers)
	addTo(pod.Spec.Containers)
	if needed && !hasVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{
			Name:         name,
			VolumeSource: v1.VolumeSource{Projected: TokenVolumeSource()},
		})
	}
}

func mountsTokenPath(mounts []v1.VolumeMount) bool {
	for _, m := range mounts {
		if m.MountPath == ServiceAccountTokenMountPath {
			return true
		}
	}
	return false
}

// TokenVolumeSource is the projected volume ServiceAccount admission adds:
// a token bound to the pod, the cluster CA and the pod's namespace.
func TokenVolumeSource() *v1.ProjectedVolumeSource {
	expiration := int64(ServiceAccountTokenExpirationSeconds)
	mode := v1.ProjectedVolumeSourceDefaultMode
	return &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &expiration, Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{
				LocalObjectReference: v1.LocalObjectReference{Name: RootCAConfigMap},
				Items:                []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{
				Path:     "namespace",
				FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
		DefaultMode: &mode,
	}
}

// checkMirrorPod refuses a mirror pod that names a ServiceAccount, uses a
// secret or projects a ServiceAccount token: the kubelet made it from a
// file, outside the API's control of those.
func checkMirrorPod(a *Attributes, pod *v1.Pod) error {
	if pod.Spec.ServiceAccountName != "" || pod.Spec.DeprecatedServiceAccount != "" {
		return forbidden(a, fmt.Errorf("a mirror pod may not reference service accounts"))
	}
	if len(podSecretNames(pod)) > 0 {
		return forbidden(a, fmt.Errorf("a mirror pod may not reference secrets"))
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for _, src := range vol.Projected.Sources {
			if src.ServiceAccountToken != nil {
				return forbidden(a, fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections"))
			}
		}
	}
	return nil
}

// podSecretNames lists the secrets a pod refers to: image pull secrets,
// secret and projected-secret volumes, the secret references of volume
// plugins, and env and envFrom of every kind of container.
func podSecretNames(pod *v1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, n)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	envs := func(env []v1.EnvVar, from []v1.EnvFromSource) {
		for _, e := range from {
			if e.SecretRef != nil {
				add(e.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		envs(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		envs(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		envs(c.Env, c.EnvFrom)
	}
	ref := func(r *v1.LocalObjectReference) {
		if r != nil {
			add(r.Name)
		}
	}
	for _, vol := range pod.Spec.Volumes {
		s := vol.VolumeSource
		switch {
		case s.Secret != nil:
			add(s.Secret.SecretName)
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		case s.AzureFile != nil:
			add(s.AzureFile.SecretName)
		case s.CephFS != nil:
			ref(s.CephFS.SecretRef)
		case s.Cinder != nil:
			ref(s.Cinder.SecretRef)
		case s.FlexVolume != nil:
			ref(s.FlexVolume.SecretRef)
		case s.RBD != nil:
			ref(s.RBD.SecretRef)
		case s.ScaleIO != nil:
			ref(s.ScaleIO.SecretRef)
		case s.ISCSI != nil:
			ref(s.ISCSI.SecretRef)
		case s.StorageOS != nil:
			ref(s.StorageOS.SecretRef)
		case s.CSI != nil:
			ref(s.CSI.NodePublishSecretRef)
		}
	}
	return names
}

// enforceMountableSecrets reports whether the ServiceAccount limits its
// pods to the secrets it lists.
func enforceMountableSecrets(sa *v1.ServiceAccount) bool {
	enforce, _ := strconv.ParseBool(sa.Annotations[EnforceMountableSecretsAnnotation])
	return enforce
}

// limitSecretReferences refuses a pod using a secret its ServiceAccount
// does not list (volumes, env of init containers and containers) or an
// image pull secret it does not list, with kube's messages.
func limitSecretReferences(sa *v1.ServiceAccount, pod *v1.Pod) error {
	mountable := map[string]bool{}
	for _, s := range sa.Secrets {
		mountable[s.Name] = true
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Secret != nil && !mountable[vol.Secret.SecretName] {
			return fmt.Errorf("volume with secret.secretName=%q is not allowed because service account %s does not reference that secret", vol.Secret.SecretName, sa.Name)
		}
	}
	check := func(kind string, containers []v1.Container) error {
		for _, c := range containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !mountable[e.ValueFrom.SecretKeyRef.Name] {
					return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=%q is not allowed because service account %s does not reference that secret",
						kind, c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, sa.Name)
				}
			}
		}
		return nil
	}
	if err := check("init container", pod.Spec.InitContainers); err != nil {
		return err
	}
	if err := check("container", pod.Spec.Containers); err != nil {
		return err
	}
	pull := map[string]bool{}
	for _, s := range sa.ImagePullSecrets {
		pull[s.Name] = true
	}
	for i, s := range pod.Spec.ImagePullSecrets {
		if !pull[s.Name] {
			return fmt.Errorf("imagePullSecrets[%d].name=%q is not allowed because service account %s does not reference that imagePullSecret", i, s.Name, sa.Name)
		}
	}
	return nil
}
