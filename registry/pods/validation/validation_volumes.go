package validation

import (
	"fmt"
	"math"
	"path"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes validates the pod volumes and returns the valid ones by
// name (volume mounts must reference one of those).
func validateVolumes(volumes []v1.Volume, podName string, fldPath *field.Path, opts options) (map[string]v1.VolumeSource, field.ErrorList) {
	var allErrs field.ErrorList
	names := sets.New[string]()
	createdPVCs := sets.New[string]()
	if podName != "" {
		for _, vol := range volumes {
			if vol.Ephemeral != nil {
				createdPVCs.Insert(podName + "-" + vol.Name)
			}
		}
	}
	vols := map[string]v1.VolumeSource{}
	for i, vol := range volumes {
		p := fldPath.Index(i)
		namePath := p.Child("name")
		el := validateVolumeSource(&vol.VolumeSource, p, vol.Name, podName, opts)
		if vol.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, validateDNS1123Label(vol.Name, namePath)...)
		}
		if names.Has(vol.Name) {
			el = append(el, field.Duplicate(namePath, vol.Name))
		}
		if len(el) == 0 {
			names.Insert(vol.Name)
			vols[vol.Name] = vol.VolumeSource
		} else {
			allErrs = append(allErrs, el...)
		}
		if vol.PersistentVolumeClaim != nil && createdPVCs.Has(vol.PersistentVolumeClaim.ClaimName) {
			allErrs = append(allErrs, field.Invalid(p.Child("persistentVolumeClaim").Child("claimName"), vol.PersistentVolumeClaim.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return vols, allErrs
}

// validateVolumeSource checks that exactly one source is set (in kube's
// order, with kube's field paths) and validates the common sources
// (emptyDir, hostPath, gitRepo, secret, nfs, glusterfs,
// persistentVolumeClaim, downwardAPI, configMap, projected, csi,
// ephemeral, image and the required fields of the legacy in-tree ones).
func validateVolumeSource(s *v1.VolumeSource, fldPath *field.Path, volName, podName string, opts options) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	// one reports whether the source named name may be validated (it is
	// the first one); a later one is Forbidden.
	one := func(set bool, name string) bool {
		if !set {
			return false
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
			return false
		}
		n++
		return true
	}
	req := func(empty bool, p *field.Path) {
		if empty {
			allErrs = append(allErrs, field.Required(p, ""))
		}
	}
	mode := func(m *int32, p *field.Path) {
		if m != nil && (*m > 0777 || *m < 0) {
			allErrs = append(allErrs, field.Invalid(p, *m, fileModeErrorMsg))
		}
	}
	keyToPaths := func(items []v1.KeyToPath, p *field.Path) {
		for i, kp := range items {
			allErrs = append(allErrs, validateKeyToPath(kp, p.Index(i))...)
		}
	}
	partition := func(v int32, p *field.Path) {
		if v < 0 || v > 255 {
			allErrs = append(allErrs, field.Invalid(p, v, validation.InclusiveRangeError(1, 255)))
		}
	}

	if s.EmptyDir != nil {
		n++
		if s.EmptyDir.SizeLimit != nil && s.EmptyDir.SizeLimit.Sign() < 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("emptyDir").Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	}
	if one(s.HostPath != nil, "hostPath") {
		p := fldPath.Child("hostPath")
		if s.HostPath.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		} else {
			allErrs = append(allErrs, validatePathNoBacksteps(s.HostPath.Path, p.Child("path"))...)
			if t := s.HostPath.Type; t != nil {
				valid := []v1.HostPathType{v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
					v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev}
				ok := false
				for _, v := range valid {
					ok = ok || *t == v
				}
				if !ok {
					allErrs = append(allErrs, field.NotSupported(p.Child("type"), *t, valid))
				}
			}
		}
	}
	if one(s.GitRepo != nil, "gitRepo") {
		p := fldPath.Child("gitRepo")
		req(s.GitRepo.Repository == "", p.Child("repository"))
		allErrs = append(allErrs, validateLocalDescendingPath(s.GitRepo.Directory, p.Child("directory"))...)
	}
	if one(s.GCEPersistentDisk != nil, "gcePersistentDisk") {
		p := fldPath.Child("persistentDisk")
		req(s.GCEPersistentDisk.PDName == "", p.Child("pdName"))
		partition(s.GCEPersistentDisk.Partition, p.Child("partition"))
	}
	if one(s.AWSElasticBlockStore != nil, "awsElasticBlockStore") {
		p := fldPath.Child("awsElasticBlockStore")
		req(s.AWSElasticBlockStore.VolumeID == "", p.Child("volumeID"))
		partition(s.AWSElasticBlockStore.Partition, p.Child("partition"))
	}
	if one(s.Secret != nil, "secret") {
		p := fldPath.Child("secret")
		req(s.Secret.SecretName == "", p.Child("secretName"))
		mode(s.Secret.DefaultMode, p.Child("defaultMode"))
		keyToPaths(s.Secret.Items, p.Child("items"))
	}
	if one(s.NFS != nil, "nfs") {
		p := fldPath.Child("nfs")
		req(s.NFS.Server == "", p.Child("server"))
		req(s.NFS.Path == "", p.Child("path"))
		if !path.IsAbs(s.NFS.Path) {
			allErrs = append(allErrs, field.Invalid(p.Child("path"), s.NFS.Path, "must be an absolute path"))
		}
	}
	if one(s.ISCSI != nil, "iscsi") {
		p := fldPath.Child("iscsi")
		req(s.ISCSI.TargetPortal == "", p.Child("targetPortal"))
		req(s.ISCSI.IQN == "", p.Child("iqn"))
		if s.ISCSI.Lun < 0 || s.ISCSI.Lun > 255 {
			allErrs = append(allErrs, field.Invalid(p.Child("lun"), s.ISCSI.Lun, validation.InclusiveRangeError(0, 255)))
		}
	}
	if one(s.Glusterfs != nil, "glusterfs") {
		p := fldPath.Child("glusterfs")
		req(s.Glusterfs.EndpointsName == "", p.Child("endpoints"))
		req(s.Glusterfs.Path == "", p.Child("path"))
	}
	if one(s.Flocker != nil, "flocker") {
		if s.Flocker.DatasetName == "" && s.Flocker.DatasetUUID == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("flocker"), "one of datasetName and datasetUUID is required"))
		}
	}
	if one(s.PersistentVolumeClaim != nil, "persistentVolumeClaim") {
		req(s.PersistentVolumeClaim.ClaimName == "", fldPath.Child("persistentVolumeClaim").Child("claimName"))
	}
	if one(s.RBD != nil, "rbd") {
		p := fldPath.Child("rbd")
		if len(s.RBD.CephMonitors) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("monitors"), ""))
		}
		req(s.RBD.RBDImage == "", p.Child("image"))
	}
	if one(s.Cinder != nil, "cinder") {
		req(s.Cinder.VolumeID == "", fldPath.Child("cinder").Child("volumeID"))
	}
	if one(s.CephFS != nil, "cephFS") {
		if len(s.CephFS.Monitors) == 0 {
			allErrs = append(allErrs, field.Required(fldPath.Child("cephfs").Child("monitors"), ""))
		}
	}
	if one(s.Quobyte != nil, "quobyte") {
		req(s.Quobyte.Volume == "", fldPath.Child("quobyte").Child("volume"))
	}
	// kube's typo: "downwarAPI".
	if one(s.DownwardAPI != nil, "downwarAPI") {
		p := fldPath.Child("downwardAPI")
		mode(s.DownwardAPI.DefaultMode, p.Child("defaultMode"))
		for _, f := range s.DownwardAPI.Items {
			allErrs = append(allErrs, validateDownwardAPIVolumeFile(&f, p)...)
		}
	}
	if one(s.FC != nil, "fc") {
		if len(s.FC.TargetWWNs) < 1 && len(s.FC.WWIDs) < 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("fc").Child("targetWWNs"), "must specify either targetWWNs or wwids, but not both"))
		}
	}
	if one(s.FlexVolume != nil, "flexVolume") {
		req(s.FlexVolume.Driver == "", fldPath.Child("flexVolume").Child("driver"))
	}
	if one(s.ConfigMap != nil, "configMap") {
		p := fldPath.Child("configMap")
		req(s.ConfigMap.Name == "", p.Child("name"))
		mode(s.ConfigMap.DefaultMode, p.Child("defaultMode"))
		keyToPaths(s.ConfigMap.Items, p.Child("items"))
	}
	if one(s.AzureFile != nil, "azureFile") {
		p := fldPath.Child("azureFile")
		req(s.AzureFile.SecretName == "", p.Child("secretName"))
		req(s.AzureFile.ShareName == "", p.Child("shareName"))
	}
	if one(s.VsphereVolume != nil, "vsphereVolume") {
		req(s.VsphereVolume.VolumePath == "", fldPath.Child("vsphereVolume").Child("volumePath"))
	}
	if one(s.PhotonPersistentDisk != nil, "photonPersistentDisk") {
		req(s.PhotonPersistentDisk.PdID == "", fldPath.Child("photonPersistentDisk").Child("pdID"))
	}
	if one(s.PortworxVolume != nil, "portworxVolume") {
		req(s.PortworxVolume.VolumeID == "", fldPath.Child("portworxVolume").Child("volumeID"))
	}
	if one(s.AzureDisk != nil, "azureDisk") {
		p := fldPath.Child("azureDisk")
		req(s.AzureDisk.DiskName == "", p.Child("diskName"))
		req(s.AzureDisk.DataDiskURI == "", p.Child("diskURI"))
	}
	if one(s.StorageOS != nil, "storageos") {
		req(s.StorageOS.VolumeName == "", fldPath.Child("storageos").Child("volumeName"))
	}
	if one(s.Projected != nil, "projected") {
		allErrs = append(allErrs, validateProjectedVolumeSource(s.Projected, fldPath.Child("projected"), opts)...)
	}
	if one(s.ScaleIO != nil, "scaleIO") {
		p := fldPath.Child("scaleIO")
		req(s.ScaleIO.Gateway == "", p.Child("gateway"))
		req(s.ScaleIO.System == "", p.Child("system"))
		req(s.ScaleIO.VolumeName == "", p.Child("volumeName"))
	}
	if one(s.CSI != nil, "csi") {
		req(s.CSI.Driver == "", fldPath.Child("csi").Child("driver"))
	}
	if one(s.Ephemeral != nil, "ephemeral") {
		p := fldPath.Child("ephemeral")
		if s.Ephemeral.VolumeClaimTemplate == nil {
			allErrs = append(allErrs, field.Required(p.Child("volumeClaimTemplate"), ""))
		}
		if podName != "" && volName != "" {
			pvc := podName + "-" + volName
			for _, msg := range validateDNSSubdomainName(pvc, fldPath.Child("name")) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", pvc, msg.Detail)))
			}
		}
	}
	if one(s.Image != nil, "image") {
		p := fldPath.Child("image")
		req(s.Image.Reference == "", p.Child("reference"))
		if s.Image.PullPolicy != "" {
			allErrs = append(allErrs, validateEnum(p.Child("pullPolicy"), s.Image.PullPolicy, v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)...)
		}
	}
	if n == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a volume type"))
	}
	return allErrs
}

func validateDownwardAPIVolumeFile(f *v1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if f.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, validateLocalNonReservedPath(f.Path, fldPath.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		allErrs = append(allErrs, validateObjectFieldSelector(f.FieldRef, volumeDownwardAPIFieldPaths, fldPath.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		allErrs = append(allErrs, validateContainerResourceFieldSelector(f.ResourceFieldRef, fldPath.Child("resourceFieldRef"), true)...)
	default:
		allErrs = append(allErrs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	if f.Mode != nil && (*f.Mode > 0777 || *f.Mode < 0) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("mode"), *f.Mode, fileModeErrorMsg))
	}
	return allErrs
}

func validateProjectedVolumeSource(pv *v1.ProjectedVolumeSource, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	if m := pv.DefaultMode; m != nil && (*m > 0777 || *m < 0) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("defaultMode"), *m, fileModeErrorMsg))
	}
	allPaths := sets.New[string]()
	addPath := func(p, name string) {
		if p == "" {
			return
		}
		if allPaths.Has(p) {
			allErrs = append(allErrs, field.Invalid(fldPath, name, "conflicting duplicate paths"))
		} else {
			allPaths.Insert(p)
		}
	}
	for i, src := range pv.Sources {
		n := 0
		sp := fldPath.Child("sources").Index(i)
		if src.Secret != nil {
			n++
			p := sp.Child("secret")
			if src.Secret.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("name"), ""))
			}
			for j, kp := range src.Secret.Items {
				allErrs = append(allErrs, validateKeyToPath(kp, p.Child("items").Index(j))...)
				addPath(kp.Path, src.Secret.Name)
			}
		}
		if src.ConfigMap != nil {
			n++
			p := sp.Child("configMap")
			if src.ConfigMap.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("name"), ""))
			}
			for j, kp := range src.ConfigMap.Items {
				allErrs = append(allErrs, validateKeyToPath(kp, p.Child("items").Index(j))...)
				addPath(kp.Path, src.ConfigMap.Name)
			}
		}
		if src.DownwardAPI != nil {
			n++
			p := sp.Child("downwardAPI")
			for _, f := range src.DownwardAPI.Items {
				allErrs = append(allErrs, validateDownwardAPIVolumeFile(&f, p)...)
				addPath(f.Path, "")
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			n++
			p := sp.Child("serviceAccountToken")
			if t.ExpirationSeconds != nil {
				if *t.ExpirationSeconds < 10*60 {
					allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
				}
				if *t.ExpirationSeconds > math.MaxUint32 {
					allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			if t.Path == "" {
				allErrs = append(allErrs, field.Required(p.Child("path"), ""))
			} else if !opts.allowNonLocalProjectedTokenPath {
				allErrs = append(allErrs, validateLocalNonReservedPath(t.Path, p.Child("path"))...)
			}
			addPath(t.Path, "")
		}
		if src.ClusterTrustBundle != nil {
			n++
		}
		if n > 1 {
			allErrs = append(allErrs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return allErrs
}

func validateKeyToPath(kp v1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if kp.Key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	}
	if kp.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, validateLocalNonReservedPath(kp.Path, fldPath.Child("path"))...)
	if kp.Mode != nil && (*kp.Mode > 0777 || *kp.Mode < 0) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("mode"), *kp.Mode, fileModeErrorMsg))
	}
	return allErrs
}
