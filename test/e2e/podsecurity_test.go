package e2e

import (
	"strings"
	"testing"
)

// TestPodSecurityWithKubectl: what a user sees of PodSecurity through
// kubectl (v1.32): a restricted namespace refuses `kubectl run
// --privileged` with kube's message, a baseline one with warn=restricted
// creates a plain pod and kubectl prints the Warning, and raising the
// enforce level of a namespace warns about its existing pods.
func TestPodSecurityWithKubectl(t *testing.T) {
	bin := kubectlPath(t)
	p := startUp(t, t.TempDir())
	k := p.kc(t, bin)

	k.expect("namespace/strict created", "create", "namespace", "strict")
	k.expect("namespace/strict labeled", "label", "namespace", "strict", "pod-security.kubernetes.io/enforce=restricted")
	k.expectFail(`Error from server (Forbidden): pods "priv" is forbidden: violates PodSecurity "restricted:latest": `+
		`privileged (container "priv" must not set securityContext.privileged=true), `+
		`allowPrivilegeEscalation != false (container "priv" must set securityContext.allowPrivilegeEscalation=false), `+
		`unrestricted capabilities (container "priv" must set securityContext.capabilities.drop=["ALL"]), `+
		`runAsNonRoot != true (pod or container "priv" must set securityContext.runAsNonRoot=true), `+
		`seccompProfile (pod or container "priv" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
		"run", "priv", "-n", "strict", "--image=busybox", "--privileged")

	k.expect("namespace/warned created", "create", "namespace", "warned")
	k.expect("namespace/warned labeled", "label", "namespace", "warned",
		"pod-security.kubernetes.io/enforce=baseline", "pod-security.kubernetes.io/warn=restricted")
	violations := `allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), ` +
		`unrestricted capabilities (container "web" must set securityContext.capabilities.drop=["ALL"]), ` +
		`runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), ` +
		`seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	k.expectOut("pod/web created", `Warning: would violate PodSecurity "restricted:latest": `+violations,
		"run", "web", "-n", "warned", "--image=nginx")
	k.expectFail(`Error from server (Forbidden): pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "priv" must not set securityContext.privileged=true)`,
		"run", "priv", "-n", "warned", "--image=busybox", "--privileged")

	// The check of existing pods reads the watch cache; a list (served
	// from it once it has caught up) makes sure it has the pod.
	k.expect("pod/web", "get", "pods", "-n", "warned", "-o", "name")
	k.expectOut("namespace/warned labeled", strings.Join([]string{
		`Warning: existing pods in namespace "warned" violate the new PodSecurity enforce level "restricted:latest"`,
		`Warning: web: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
	}, "\n"), "label", "namespace", "warned", "--overwrite", "pod-security.kubernetes.io/enforce=restricted")

	k.expectFail(`The Namespace "strict" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`,
		"label", "namespace", "strict", "--overwrite", "pod-security.kubernetes.io/enforce=strict")
}
