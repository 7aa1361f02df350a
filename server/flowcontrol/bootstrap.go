package flowcontrol

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bootstrap.yaml
var bootstrapYAML string

// bootstrapKindAnnotation marks, in bootstrap.yaml only, whether an object
// is mandatory or suggested.
const bootstrapKindAnnotation = "corekube.io/bootstrap"

// Bootstrap is kube's bootstrap configuration: the objects the server
// keeps (Ensure) and the configuration it runs on until it has read the
// stored one.
type Bootstrap struct {
	FlowSchemas    []*flowcontrolv1.FlowSchema
	PriorityLevels []*flowcontrolv1.PriorityLevelConfiguration
	// Mandatory names the mandatory objects, by kind and name (shared:
	// read only).
	Mandatory map[string]bool
}

// BootstrapConfiguration returns a fresh copy of the bootstrap objects,
// without the marker annotation.
func BootstrapConfiguration() *Bootstrap {
	parsed := parsedBootstrap()
	b := &Bootstrap{Mandatory: parsed.Mandatory}
	for _, fs := range parsed.FlowSchemas {
		b.FlowSchemas = append(b.FlowSchemas, fs.DeepCopy())
	}
	for _, pl := range parsed.PriorityLevels {
		b.PriorityLevels = append(b.PriorityLevels, pl.DeepCopy())
	}
	return b
}

// parsedBootstrap is bootstrap.yaml decoded once; never modified.
var parsedBootstrap = sync.OnceValue(parseBootstrap)

func parseBootstrap() *Bootstrap {
	b := &Bootstrap{Mandatory: map[string]bool{}}
	for _, doc := range strings.Split(bootstrapYAML, "\n---\n")[1:] {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			panic(fmt.Sprintf("bootstrap.yaml: %v", err))
		}
		switch head.Kind {
		case "FlowSchema":
			fs := &flowcontrolv1.FlowSchema{}
			if err := yaml.UnmarshalStrict([]byte(doc), fs); err != nil {
				panic(fmt.Sprintf("bootstrap.yaml: %v", err))
			}
			b.mark("FlowSchema", fs.Name, fs.Annotations)
			fs.Annotations = nil
			b.FlowSchemas = append(b.FlowSchemas, fs)
		case "PriorityLevelConfiguration":
			pl := &flowcontrolv1.PriorityLevelConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), pl); err != nil {
				panic(fmt.Sprintf("bootstrap.yaml: %v", err))
			}
			b.mark("PriorityLevelConfiguration", pl.Name, pl.Annotations)
			pl.Annotations = nil
			b.PriorityLevels = append(b.PriorityLevels, pl)
		default:
			panic(fmt.Sprintf("bootstrap.yaml: unexpected kind %q", head.Kind))
		}
	}
	return b
}

func (b *Bootstrap) mark(kind, name string, annotations map[string]string) {
	if annotations[bootstrapKindAnnotation] == "mandatory" {
		b.Mandatory[kind+"/"+name] = true
	}
}
