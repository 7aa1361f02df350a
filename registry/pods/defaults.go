package pods

import (
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corekube/corekube/registry/pods/internal/podutil"
)

// Default applies to pod what kube-apiserver's v1 scheme defaulting
// (SetObjectDefaults_Pod) and the v1<->internal round trip do when a pod is
// decoded: restartPolicy, dnsPolicy, schedulerName, securityContext,
// terminationGracePeriodSeconds, enableServiceLinks, container
// imagePullPolicy / terminationMessage*, port protocol, requests defaulted
// from limits, hostNetwork host ports, probe and handler defaults, volume
// source defaults, downward-API apiVersion, quantity rounding to milli
// scale, serviceAccount/serviceAccountName aliasing and podIP/podIPs
// normalisation. It does not apply admission defaults (priority,
// preemptionPolicy, service account, tolerations).
func Default(pod *v1.Pod) {
	spec := &pod.Spec

	// SetDefaults_Pod: requests default to limits (containers and init
	// containers only; a PodTemplate does not get this).
	for _, cs := range [][]v1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			defaultRequestsFromLimits(&cs[i].Resources)
		}
	}
	if spec.EnableServiceLinks == nil {
		b := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &b
	}
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.Containers)
		defaultHostNetworkPorts(spec.InitContainers)
	}

	// SetDefaults_PodSpec.
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		p := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &p
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}

	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	podutil.EachContainer(spec, defaultContainer)
	roundResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundResourceList(spec.Resources.Limits)
		roundResourceList(spec.Resources.Requests)
	}

	// v1 -> internal -> v1 conversion: serviceAccount is a deprecated alias
	// of serviceAccountName (the new field wins) and is always written back.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName

	normalizePodIPs(&pod.Status)
}

// normalizePodIPs mirrors the PodStatus conversion: the internal type only
// has podIPs; podIP is authoritative when both are set and differ, and on
// the way out podIP is podIPs[0].
func normalizePodIPs(st *v1.PodStatus) {
	if st.PodIP != "" && (len(st.PodIPs) == 0 || st.PodIPs[0].IP != st.PodIP) {
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}
	if len(st.PodIPs) > 0 {
		st.PodIP = st.PodIPs[0].IP
	}
}

func defaultRequestsFromLimits(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = make(v1.ResourceList)
	}
	for k, v := range r.Limits {
		if _, ok := r.Requests[k]; !ok {
			r.Requests[k] = v.DeepCopy()
		}
	}
}

func defaultHostNetworkPorts(cs []v1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// roundResourceList is SetDefaults_ResourceList: values are rounded up to
// milli scale.
func roundResourceList(l v1.ResourceList) {
	for k, v := range l {
		q := v.DeepCopy()
		q.RoundUp(resource.Milli)
		l[k] = q
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = v1.PullAlways
		} else {
			c.ImagePullPolicy = v1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		defaultHTTPGet(p.HTTPGet)
	}
	if lc := c.Lifecycle; lc != nil {
		if lc.PostStart != nil {
			defaultHTTPGet(lc.PostStart.HTTPGet)
		}
		if lc.PreStop != nil {
			defaultHTTPGet(lc.PreStop.HTTPGet)
		}
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultVolume(v *v1.Volume) {
	s := &v.VolumeSource
	if *s == (v1.VolumeSource{}) {
		s.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32, def int32) {
		if *m == nil {
			*m = &def
		}
	}
	if s.Secret != nil {
		mode(&s.Secret.DefaultMode, v1.SecretVolumeSourceDefaultMode)
	}
	if s.ConfigMap != nil {
		mode(&s.ConfigMap.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode)
	}
	if s.DownwardAPI != nil {
		mode(&s.DownwardAPI.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode)
		defaultDownwardAPIFiles(s.DownwardAPI.Items)
	}
	if s.Projected != nil {
		mode(&s.Projected.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
		for i := range s.Projected.Sources {
			src := &s.Projected.Sources[i]
			if src.DownwardAPI != nil {
				defaultDownwardAPIFiles(src.DownwardAPI.Items)
			}
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(3600)
				src.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
	if s.HostPath != nil && s.HostPath.Type == nil {
		t := v1.HostPathUnset
		s.HostPath.Type = &t
	}
	if s.ISCSI != nil && s.ISCSI.ISCSIInterface == "" {
		s.ISCSI.ISCSIInterface = "default"
	}
	if s.RBD != nil {
		if s.RBD.RBDPool == "" {
			s.RBD.RBDPool = "rbd"
		}
		if s.RBD.RadosUser == "" {
			s.RBD.RadosUser = "admin"
		}
		if s.RBD.Keyring == "" {
			s.RBD.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := s.AzureDisk; d != nil {
		if d.CachingMode == nil {
			m := v1.AzureDataDiskCachingReadWrite
			d.CachingMode = &m
		}
		if d.FSType == nil {
			fs := "ext4"
			d.FSType = &fs
		}
		if d.ReadOnly == nil {
			ro := false
			d.ReadOnly = &ro
		}
		if d.Kind == nil {
			k := v1.AzureSharedBlobDisk
			d.Kind = &k
		}
	}
	if sc := s.ScaleIO; sc != nil {
		if sc.StorageMode == "" {
			sc.StorageMode = "ThinProvisioned"
		}
		if sc.FSType == "" {
			sc.FSType = "xfs"
		}
	}
	if e := s.Ephemeral; e != nil && e.VolumeClaimTemplate != nil && e.VolumeClaimTemplate.Spec.VolumeMode == nil {
		m := v1.PersistentVolumeFilesystem
		e.VolumeClaimTemplate.Spec.VolumeMode = &m
	}
}

func defaultDownwardAPIFiles(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil && items[i].FieldRef.APIVersion == "" {
			items[i].FieldRef.APIVersion = "v1"
		}
	}
}

// Image reference grammar of github.com/distribution/reference, which kube
// uses (pkg/util/parsers.ParseImageName) to pick the default pull policy.
var (
	anchoredIdentifierRE = regexp.MustCompile(`^[a-f0-9]{64}$`)
	imageReferenceRE     = func() *regexp.Regexp {
		alnum := `[a-z0-9]+`
		sep := `(?:[._]|__|[-]+)`
		pathComponent := alnum + `(?:` + sep + alnum + `)*`
		domainComponent := `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		host := `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[(?:[a-fA-F0-9:]+)\])`
		domain := host + `(?::[0-9]+)?`
		name := `(?:` + domain + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
		tag := `[\w][\w.-]{0,127}`
		digest := `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`
		return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
	}()
	digestHexLen = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
	lowerHexRE   = regexp.MustCompile(`^[a-f0-9]+$`)
)

// imageTag returns the tag kube's ParseImageName derives for image: the
// explicit tag, "latest" when neither a tag nor a digest is given, and ""
// when only a digest is given or the reference does not parse.
func imageTag(image string) string {
	if anchoredIdentifierRE.MatchString(image) {
		return ""
	}
	// Normalisation (docker.io/library/...) does not change the tag, but
	// the repository path must be lower case.
	remainder := image
	if i := strings.IndexRune(image, '/'); i >= 0 {
		d := image[:i]
		if strings.ContainsAny(d, ".:") || d == "localhost" || strings.ToLower(d) != d {
			remainder = image[i+1:]
		}
	}
	remote := remainder
	if i := strings.IndexRune(remote, ':'); i >= 0 {
		remote = remote[:i]
	}
	if strings.ToLower(remote) != remote {
		return ""
	}
	m := imageReferenceRE.FindStringSubmatch(image)
	if m == nil || len(m[1]) > 255 {
		return ""
	}
	tag, dgst := m[2], m[3]
	if dgst != "" {
		alg, hex, _ := strings.Cut(dgst, ":")
		if n, ok := digestHexLen[alg]; !ok || len(hex) != n || !lowerHexRE.MatchString(hex) {
			return ""
		}
	}
	if tag == "" && dgst == "" {
		return "latest"
	}
	return tag
}
