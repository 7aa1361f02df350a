package openapi

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// componentPrefix is where OpenAPI 3 documents keep their schemas.
const componentPrefix = "#/components/schemas/"

// Extensions kube puts on schemas.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extMapType       = "x-kubernetes-map-type"
	extAction        = "x-kubernetes-action"
)

// swaggerDocer is implemented by the k8s.io/api and apimachinery types:
// the "" key is the type's description, the others its fields'.
type swaggerDocer interface{ SwaggerDoc() map[string]string }

// openAPITyper is implemented by the types whose JSON form is not their Go
// structure (metav1.Time, resource.Quantity, intstr.IntOrString, ...).
type openAPITyper interface {
	OpenAPISchemaType() []string
	OpenAPISchemaFormat() string
}

// openAPIV3OneOfTyper says which JSON types such a type takes in OpenAPI 3.
type openAPIV3OneOfTyper interface{ OpenAPIV3OneOfTypes() []string }

// typeDescriptions are the descriptions of types that have no SwaggerDoc,
// from their Go doc comments as kube's OpenAPI shows them.
var typeDescriptions = map[string]string{
	"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent": "Event represents a single event to a watched resource.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  "MicroTime is version of Time with microsecond level precision.",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, " +
		"it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.",
	"io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling in JSON and YAML, " +
		"in addition to String() and AsInt64() accessors.\n\nThe serialization format is:\n\n" +
		"``` <quantity>        ::= <signedNumber><suffix>\n\n\t(Note that <suffix> may be empty, from the \"\" case in <decimalSI>.)\n\n" +
		"<digit>           ::= 0 | 1 | ... | 9 <digits>          ::= <digit> | <digit><digits> " +
		"<number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits> <sign>            ::= \"+\" | \"-\" " +
		"<signedNumber>    ::= <number> | <sign><number> <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI> " +
		"<binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei\n\n\t(International System of units; See: http://physics.nist.gov/cuu/Units/binary.html)\n\n" +
		"<decimalSI>       ::= m | \"\" | k | M | G | T | P | E\n\n\t(Note that 1024 = 1Ki but 1000 = 1k; I didn't choose the capitalization.)\n\n" +
		"<decimalExponent> ::= \"e\" <signedNumber> | \"E\" <signedNumber> ```\n\n" +
		"No matter which of the three exponent forms is used, no quantity may represent a number greater than 2^63-1 in magnitude, " +
		"nor may it have more than 3 decimal places. Numbers larger or more precise will be capped or rounded up. (E.g.: 0.1m will rounded up to 1m.) " +
		"This may be extended in the future if we require larger or smaller quantities.\n\n" +
		"When a Quantity is parsed from a string, it will remember the type of suffix it had, and will use the same type again when it is serialized.\n\n" +
		"Before serializing, Quantity will be put in \"canonical form\". This means that Exponent/suffix will be adjusted up or down " +
		"(with a corresponding increase or decrease in Mantissa) such that:\n\n" +
		"- No precision is lost - No fractional digits will be emitted - The exponent (or suffix) is as large as possible.\n\n" +
		"The sign will be omitted unless the number is negative.\n\nExamples:\n\n" +
		"- 1.5 will be serialized as \"1500m\" - 1.5Gi will be serialized as \"1536Mi\"\n\n" +
		"Note that the quantity will NEVER be internally represented by a floating point number. That is the whole point of this exercise.\n\n" +
		"Non-canonical values will still parse as long as they are well formed, but will be re-emitted in their canonical form. " +
		"(So always use canonical form, or don't diff.)\n\n" +
		"This format is intended to make it difficult to use these numbers without writing some sort of special handling code " +
		"in the hopes that that will cause implementors to also use a fixed point implementation.",
	"io.k8s.apimachinery.pkg.runtime.RawExtension": "RawExtension is used to hold extensions in external versions.\n\n" +
		"To use this, make a field which has RawExtension as its type in your external, versioned struct, and Object in your internal struct. " +
		"You also need to register your various plugin types.",
}

// atomicStructs are the structs kube marks +structType=atomic: they are
// replaced as a whole by server-side apply.
var atomicStructs = map[string]bool{
	"io.k8s.api.core.v1.ObjectReference":                  true,
	"io.k8s.api.core.v1.LocalObjectReference":             true,
	"io.k8s.api.core.v1.TypedLocalObjectReference":        true,
	"io.k8s.api.core.v1.ConfigMapKeySelector":             true,
	"io.k8s.api.core.v1.SecretKeySelector":                true,
	"io.k8s.api.core.v1.ObjectFieldSelector":              true,
	"io.k8s.api.core.v1.ResourceFieldSelector":            true,
	"io.k8s.api.core.v1.NodeSelector":                     true,
	"io.k8s.api.core.v1.NodeSelectorTerm":                 true,
	"io.k8s.api.core.v1.TopologySelectorTerm":             true,
	"io.k8s.api.core.v1.SecretReference":                  true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector":  true,
	"io.k8s.api.rbac.v1.RoleRef":                          true,
	"io.k8s.api.rbac.v1.Subject":                          true,
	"io.k8s.api.core.v1.EndpointAddress":                  true,
	"io.k8s.api.core.v1.EndpointPort":                     true,
	"io.k8s.api.core.v1.ScopeSelector":                    true,

	"io.k8s.api.admissionregistration.v1.MatchResources":          true,
	"io.k8s.api.admissionregistration.v1.NamedRuleWithOperations": true,
	"io.k8s.api.admissionregistration.v1.ParamKind":               true,
	"io.k8s.api.admissionregistration.v1.ParamRef":                true,
	"io.k8s.api.admissionregistration.v1.Variable":                true,
}

// listMarker is a field's +listType marker (and its +listMapKey keys).
// An empty Type stands for a list kube leaves unmarked.
type listMarker struct {
	Type string
	Keys []string
}

var (
	atomicList   = listMarker{Type: "atomic"}
	setList      = listMarker{Type: "set"}
	unmarkedList = listMarker{}
	mapList      = func(keys ...string) listMarker { return listMarker{Type: "map", Keys: keys} }
)

// listTypeOverrides are the lists whose +listType/+listMapKey markers differ
// from what their patch tags suggest, keyed by declaring type and JSON
// field name. With them, listType below reproduces every +listType and
// +listMapKey of core, policy, coordination, rbac, certificates,
// flowcontrol, admissionregistration, authentication and authorization v1 and meta/v1
// in k8s.io/api v0.32 (all their kinds, served or not);
// TestModelsMatchKubeMarkers checks it against testdata/kube-markers.json.
// kube also marks a few fields that are no lists (byte strings, a struct):
// the marker is published, structured-merge-diff ignores it there.
var listTypeOverrides = map[string]listMarker{
	"io.k8s.api.core.v1.Container.ports":                   mapList("containerPort", "protocol"),
	"io.k8s.api.core.v1.EphemeralContainerCommon.ports":    mapList("containerPort", "protocol"),
	"io.k8s.api.core.v1.PodSpec.topologySpreadConstraints": mapList("topologyKey", "whenUnsatisfiable"),
	"io.k8s.api.core.v1.PodStatus.hostIPs":                 atomicList,
	"io.k8s.api.core.v1.ResourceStatus.resources":          mapList("resourceID"),
	"io.k8s.api.core.v1.ResourceRequirements.claims":       mapList("name"),
	"io.k8s.api.core.v1.ServiceSpec.ports":                 mapList("port", "protocol"),

	"io.k8s.api.certificates.v1.CertificateSigningRequestStatus.conditions":  mapList("type"),
	"io.k8s.api.certificates.v1.CertificateSigningRequestSpec.request":       atomicList,
	"io.k8s.api.certificates.v1.CertificateSigningRequestStatus.certificate": atomicList,

	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec.validationActions": setList,
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus.conditions":             mapList("type"),

	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule.verbs":              setList,
	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule.apiGroups":          setList,
	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule.resources":          setList,
	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule.namespaces":         setList,
	"io.k8s.api.flowcontrol.v1.NonResourcePolicyRule.verbs":           setList,
	"io.k8s.api.flowcontrol.v1.NonResourcePolicyRule.nonResourceURLs": setList,

	"io.k8s.apimachinery.pkg.apis.meta.v1.APIResource.verbs": unmarkedList,
	"io.k8s.apimachinery.pkg.apis.meta.v1.Status.details":    atomicList,
}

// fieldMapTypes are the map and struct fields kube marks +mapType or
// +structType (atomic or granular), overriding their type's.
var fieldMapTypes = map[string]string{
	"io.k8s.api.core.v1.PodSpec.nodeSelector":                                  "atomic",
	"io.k8s.api.core.v1.ServiceSpec.selector":                                  "atomic",
	"io.k8s.api.core.v1.ReplicationControllerSpec.selector":                    "atomic",
	"io.k8s.api.core.v1.PersistentVolumeClaimStatus.allocatedResourceStatuses": "granular",
	"io.k8s.api.core.v1.PersistentVolumeSpec.claimRef":                         "granular",
}

// fieldDefaults are kube's +default markers on the types of the served
// group-versions (not visible at run time). Server-side apply needs them: a list keyed by a
// field with a default (ports by containerPort and protocol) accepts
// items that omit it.
var fieldDefaults = map[string]any{
	"io.k8s.api.core.v1.ContainerPort.protocol":                     "TCP",
	"io.k8s.api.core.v1.ServicePort.protocol":                       "TCP",
	"io.k8s.api.core.v1.GRPCAction.service":                         "",
	"io.k8s.api.core.v1.LocalObjectReference.name":                  "",
	"io.k8s.api.core.v1.RBDVolumeSource.pool":                       "rbd",
	"io.k8s.api.core.v1.RBDVolumeSource.user":                       "admin",
	"io.k8s.api.core.v1.RBDVolumeSource.keyring":                    "/etc/ceph/keyring",
	"io.k8s.api.core.v1.RBDPersistentVolumeSource.pool":             "rbd",
	"io.k8s.api.core.v1.RBDPersistentVolumeSource.user":             "admin",
	"io.k8s.api.core.v1.RBDPersistentVolumeSource.keyring":          "/etc/ceph/keyring",
	"io.k8s.api.core.v1.ISCSIPersistentVolumeSource.iscsiInterface": "default",
	"io.k8s.api.core.v1.ISCSIVolumeSource.iscsiInterface":           "default",
	"io.k8s.api.core.v1.AzureDiskVolumeSource.cachingMode":          "ReadWrite",
	"io.k8s.api.core.v1.AzureDiskVolumeSource.fsType":               "ext4",
	"io.k8s.api.core.v1.AzureDiskVolumeSource.readOnly":             false,
	"io.k8s.api.core.v1.AzureDiskVolumeSource.kind":                 "Shared",
	"io.k8s.api.core.v1.ScaleIOVolumeSource.storageMode":            "ThinProvisioned",
	"io.k8s.api.core.v1.ScaleIOVolumeSource.fsType":                 "xfs",
	"io.k8s.api.core.v1.ScaleIOPersistentVolumeSource.storageMode":  "ThinProvisioned",
	"io.k8s.api.core.v1.ScaleIOPersistentVolumeSource.fsType":       "xfs",
}

// optionalFields are the fields kube marks +optional although their JSON
// tag has no omitempty (kube-openapi: a field is required unless it is
// omitempty or +optional; only omitempty is visible at run time). This is
// every such field of the served types in k8s.io/api v0.32 (checked by
// TestModelsMatchKubeMarkers).
var optionalFields = map[string]bool{
	"io.k8s.api.core.v1.ContainerImage.names":                            true,
	"io.k8s.api.core.v1.Event.reportingComponent":                        true,
	"io.k8s.api.core.v1.Event.reportingInstance":                         true,
	"io.k8s.api.core.v1.GRPCAction.service":                              true,
	"io.k8s.api.core.v1.NodeRuntimeHandler.name":                         true,
	"io.k8s.api.core.v1.ProjectedVolumeSource.sources":                   true,
	"io.k8s.api.core.v1.TypedLocalObjectReference.apiGroup":              true,
	"io.k8s.api.core.v1.TypedObjectReference.apiGroup":                   true,
	"io.k8s.api.core.v1.AzureFilePersistentVolumeSource.secretNamespace": true,
	"io.k8s.api.rbac.v1.Role.rules":                                      true,
	"io.k8s.api.rbac.v1.ClusterRole.rules":                               true,
	"io.k8s.api.authentication.v1.TokenRequestSpec.expirationSeconds":    true,
	"io.k8s.api.authentication.v1.TokenRequestSpec.boundObjectRef":       true,

	"io.k8s.api.flowcontrol.v1.FlowSchemaSpec.matchingPrecedence":                          true,
	"io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration.nominalConcurrencyShares": true,
	"io.k8s.api.flowcontrol.v1.QueuingConfiguration.queues":                                true,
	"io.k8s.api.flowcontrol.v1.QueuingConfiguration.handSize":                              true,
	"io.k8s.api.flowcontrol.v1.QueuingConfiguration.queueLengthLimit":                      true,
	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule.namespaces":                              true,
}

// schemaBuilder generates kube-style schemas from Go types. Every named
// struct type (and every type with its own OpenAPI form) becomes one
// component; fields refer to it.
type schemaBuilder struct {
	components map[string]*openapi3.Schema
	names      map[reflect.Type]string
	// special are the components whose form is not their Go structure:
	// their v2 form is a plain string with the same format.
	special map[string]bool
	// structDefaults are the {} defaults of struct fields, kept only for
	// targets that {} is valid for (no required fields).
	structDefaults []structDefault
}

type structDefault struct {
	ref    *openapi3.SchemaRef // an allOf wrapper of target carrying the default
	target string
	// collapsible wrappers carry nothing but the default: without it they
	// become a plain $ref again.
	collapsible bool
}

func newSchemaBuilder() *schemaBuilder {
	return &schemaBuilder{
		components: map[string]*openapi3.Schema{},
		names:      map[reflect.Type]string{},
		special:    map[string]bool{},
	}
}

// definitionName is kube's name of a Go type: the package path with its
// domain reversed, dot-joined, then the type name
// ("k8s.io/api/core/v1".Pod → "io.k8s.api.core.v1.Pod").
func definitionName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	parts[0] = strings.Join(domain, ".")
	return strings.Join(parts, ".") + "." + t.Name()
}

// componentRef returns a $ref to the component of t (a named struct type
// or a type with its own OpenAPI form), building it on first use.
func (b *schemaBuilder) componentRef(t reflect.Type) (*openapi3.SchemaRef, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name, ok := b.names[t]
	if !ok {
		name = definitionName(t)
		b.names[t] = name
		s := &openapi3.Schema{}
		b.components[name] = s
		if err := b.fillComponent(t, name, s); err != nil {
			return nil, err
		}
	}
	return &openapi3.SchemaRef{Ref: componentPrefix + name, Value: b.components[name]}, nil
}

// component returns the component schema called name, or nil.
func (b *schemaBuilder) component(name string) *openapi3.Schema { return b.components[name] }

func typesOf(t ...string) *openapi3.Types { v := openapi3.Types(t); return &v }

func (b *schemaBuilder) fillComponent(t reflect.Type, name string, s *openapi3.Schema) error {
	zero := reflect.New(t).Elem().Interface()
	s.Description = typeDescriptions[name]
	if d, ok := zero.(swaggerDocer); ok && d.SwaggerDoc()[""] != "" {
		s.Description = d.SwaggerDoc()[""]
	}
	if typer, ok := zero.(openAPITyper); ok {
		b.special[name] = true
		format := typer.OpenAPISchemaFormat()
		if oneOf, ok := zero.(openAPIV3OneOfTyper); ok {
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf(typ)}})
			}
			s.Format = format
			return nil
		}
		s.Type = typesOf(typer.OpenAPISchemaType()...)
		s.Format = format
		return nil
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("openapi: %s is not a struct", t)
	}
	s.Type = typesOf("object")
	if atomicStructs[name] {
		s.Extensions = map[string]any{extMapType: "atomic"}
	}
	return b.addFields(t, name, s)
}

// addFields adds the JSON fields of struct t to s, flattening inline
// (embedded) structs as encoding/json does.
func (b *schemaBuilder) addFields(t reflect.Type, declaring string, s *openapi3.Schema) error {
	var docs map[string]string
	if d, ok := reflect.New(t).Elem().Interface().(swaggerDocer); ok {
		docs = d.SwaggerDoc()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := b.addFields(et, definitionName(et), s); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
		prop, err := b.fieldSchema(f, declaring, name, omitEmpty, docs[name])
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		if s.Properties == nil {
			s.Properties = openapi3.Schemas{}
		}
		s.Properties[name] = prop
		if !omitEmpty && !optionalFields[declaring+"."+name] {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// fieldSchema is the schema of one struct field: its type's schema with
// the field's description, default and patch/list extensions.
func (b *schemaBuilder) fieldSchema(f reflect.StructField, declaring, name string, omitEmpty bool, desc string) (*openapi3.SchemaRef, error) {
	base, err := b.typeSchema(f.Type)
	if err != nil {
		return nil, err
	}
	ext := map[string]any{}
	if v := f.Tag.Get("patchStrategy"); v != "" {
		ext[extPatchStrategy] = v
	}
	mergeKey := f.Tag.Get("patchMergeKey")
	if mergeKey != "" {
		ext[extPatchMergeKey] = mergeKey
	}
	ft := f.Type
	// List types lack +listType only on the items of XxxList kinds.
	isListItems := name == "items" && strings.HasSuffix(declaring, "List")
	isList := ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && !isListItems
	if _, ok := listTypeOverrides[declaring+"."+name]; ok || isList {
		b.listType(ext, declaring+"."+name, ft, f.Tag.Get("patchStrategy"), mergeKey)
	}
	if v := fieldMapTypes[declaring+"."+name]; v != "" {
		ext[extMapType] = v
	}

	var def any
	switch {
	case fieldDefaults[declaring+"."+name] != nil:
		def = fieldDefaults[declaring+"."+name]
	case ft.Kind() == reflect.Struct && base.Ref != "" && !b.special[strings.TrimPrefix(base.Ref, componentPrefix)]:
		def = map[string]any{} // checked against the target later
	case !omitEmpty && base.Ref == "":
		def = zeroDefault(ft)
	}

	if base.Ref != "" {
		if desc == "" && def == nil && len(ext) == 0 {
			return base, nil
		}
		wrapper := &openapi3.Schema{AllOf: openapi3.SchemaRefs{base}, Description: desc}
		if len(ext) > 0 {
			wrapper.Extensions = ext
		}
		ref := &openapi3.SchemaRef{Value: wrapper}
		if def != nil {
			wrapper.Default = def
			b.structDefaults = append(b.structDefaults, structDefault{ref: ref, target: strings.TrimPrefix(base.Ref, componentPrefix), collapsible: desc == "" && len(ext) == 0})
		}
		return ref, nil
	}
	s := base.Value // inline schemas are fresh per use
	s.Description = desc
	if def != nil {
		s.Default = def
	}
	if len(ext) > 0 {
		if s.Extensions == nil {
			s.Extensions = map[string]any{}
		}
		for k, v := range ext {
			s.Extensions[k] = v
		}
	}
	return base, nil
}

// listType sets kube's x-kubernetes-list-type (and map keys) of a list
// field (or of the few other fields listTypeOverrides names). kube takes
// them from +listType markers, which are not visible at run time; they
// follow the patch tags except where listTypeOverrides says otherwise: a merge list with a merge key is a map keyed by it, a
// merge list of scalars is a set, anything else is atomic.
func (b *schemaBuilder) listType(ext map[string]any, key string, list reflect.Type, strategy, mergeKey string) {
	if m, ok := listTypeOverrides[key]; ok {
		if m.Type != "" {
			ext[extListType] = m.Type
		}
		if len(m.Keys) > 0 {
			ext[extListMapKeys] = toAnySlice(m.Keys)
		}
		return
	}
	elem := list.Elem()
	merge := false
	for _, s := range strings.Split(strategy, ",") {
		if s == "merge" {
			merge = true
		}
	}
	for elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	switch {
	case merge && mergeKey != "":
		ext[extListType] = "map"
		ext[extListMapKeys] = toAnySlice([]string{mergeKey})
	case merge && elem.Kind() != reflect.Struct:
		ext[extListType] = "set"
	default:
		ext[extListType] = "atomic"
	}
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// typeSchema is the schema of a Go type: a $ref for named structs and
// types with their own OpenAPI form, an inline schema otherwise.
func (b *schemaBuilder) typeSchema(t reflect.Type) (*openapi3.SchemaRef, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := reflect.New(t).Elem().Interface().(openAPITyper); ok {
		return b.componentRef(t)
	}
	inline := func(typ, format string) (*openapi3.SchemaRef, error) {
		return &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf(typ), Format: format}}, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			return nil, fmt.Errorf("anonymous struct %s", t)
		}
		return b.componentRef(t)
	case reflect.String:
		return inline("string", "")
	case reflect.Bool:
		return inline("boolean", "")
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Int, reflect.Uint:
		return inline("integer", "int32")
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return inline("integer", "int64")
	case reflect.Float32:
		return inline("number", "float")
	case reflect.Float64:
		return inline("number", "double")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return inline("string", "byte")
		}
		items, err := b.elemSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf("array"), Items: items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %s", t.Key())
		}
		values, err := b.elemSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf("object"), AdditionalProperties: openapi3.AdditionalProperties{Schema: values}}}, nil
	case reflect.Interface:
		return &openapi3.SchemaRef{Value: &openapi3.Schema{}}, nil
	}
	return nil, fmt.Errorf("unsupported type %s", t)
}

// elemSchema is the schema of a list item or map value: kube gives
// non-pointer items their zero value ({} for structs) as default.
func (b *schemaBuilder) elemSchema(t reflect.Type) (*openapi3.SchemaRef, error) {
	base, err := b.typeSchema(t)
	if err != nil {
		return nil, err
	}
	if t.Kind() == reflect.Pointer {
		return base, nil
	}
	if base.Ref == "" {
		if def := zeroDefault(t); def != nil {
			base.Value.Default = def
		}
		return base, nil
	}
	target := strings.TrimPrefix(base.Ref, componentPrefix)
	if t.Kind() != reflect.Struct || b.special[target] {
		return base, nil
	}
	ref := &openapi3.SchemaRef{Value: &openapi3.Schema{AllOf: openapi3.SchemaRefs{base}, Default: map[string]any{}}}
	b.structDefaults = append(b.structDefaults, structDefault{ref: ref, target: target, collapsible: true})
	return ref, nil
}

// zeroDefault is kube's default for a non-pointer scalar: its zero value.
func zeroDefault(t reflect.Type) any {
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 0
	case reflect.Float32, reflect.Float64:
		return 0.0
	}
	return nil
}

// finish drops the {} defaults whose target has required fields: {} would
// not validate against it (kube keeps them; kin-openapi's validator, rightly,
// rejects them).
func (b *schemaBuilder) finish() {
	for _, d := range b.structDefaults {
		t := b.components[d.target]
		if t != nil && len(t.Required) == 0 {
			continue
		}
		d.ref.Value.Default = nil
		if d.collapsible {
			d.ref.Ref, d.ref.Value = componentPrefix+d.target, t
		}
	}
	b.structDefaults = nil
}

// setGVK records the kinds a component is served as.
func (b *schemaBuilder) setGVK(name string, gvks []schema.GroupVersionKind) {
	s := b.components[name]
	if s == nil {
		return
	}
	sort.Slice(gvks, func(i, j int) bool {
		if gvks[i].Group != gvks[j].Group {
			return gvks[i].Group < gvks[j].Group
		}
		if gvks[i].Version != gvks[j].Version {
			return gvks[i].Version < gvks[j].Version
		}
		return gvks[i].Kind < gvks[j].Kind
	})
	list := make([]any, 0, len(gvks))
	for _, gvk := range gvks {
		list = append(list, gvkMap(gvk))
	}
	if s.Extensions == nil {
		s.Extensions = map[string]any{}
	}
	s.Extensions[extGVK] = list
}

func gvkMap(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}
