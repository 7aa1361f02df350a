package e2e

import "testing"

// testAuthCanI: `kubectl auth can-i` (a SelfSubjectAccessReview, as the
// impersonated ServiceAccount) agrees with what a Role grants, and
// `--list` (a SelfSubjectRulesReview) shows the Role's rules.
func testAuthCanI(t *testing.T, k *kc) {
	k.ok("create", "namespace", "cani")
	k.ok("create", "serviceaccount", "bot", "-n", "cani")
	k.ok("create", "role", "pod-maker", "--verb=create,get", "--resource=pods", "-n", "cani")
	k.ok("create", "rolebinding", "bot-makes", "--role=pod-maker", "--serviceaccount=cani:bot", "-n", "cani")
	const bot = "--as=system:serviceaccount:cani:bot"

	// The binding reaches the authorizer through a watch.
	k.eventually("yes", "auth", "can-i", "create", "pods", "-n", "cani", bot)
	k.expect("yes", "auth", "can-i", "get", "pods", "-n", "cani", bot)
	// "no" exits 1, as kubectl's can-i does.
	k.expectFailOut("no", "", "auth", "can-i", "delete", "pods", "-n", "cani", bot)
	k.expectFailOut("no", "", "auth", "can-i", "create", "pods", "-n", "default", bot)
	k.expectFailOut("no", "", "auth", "can-i", "get", "pods", "-n", "cani", "--subresource=log", bot)
	k.expect("yes", "auth", "can-i", "get", "/healthz", bot)
	k.expectFailOut("no", "", "auth", "can-i", "get", "/metrics", bot)
	// A group's binding: the impersonated user holds it only with the
	// group.
	k.ok("create", "rolebinding", "devs-make", "--role=pod-maker", "--group=cani-devs", "-n", "cani")
	k.eventually("yes", "auth", "can-i", "create", "pods", "-n", "cani", "--as=alice", "--as-group=cani-devs")
	k.expectFailOut("no", "", "auth", "can-i", "create", "pods", "-n", "cani", "--as=alice")

	// The admin (system:masters); kubectl warns about the namespace it
	// would have sent.
	k.expectOut("yes", "Warning: resource 'nodes' is not namespace scoped\n", "auth", "can-i", "delete", "nodes")

	// The Role's rules beside what every authenticated user holds
	// (system:basic-user, system:discovery, system:public-info-viewer,
	// system:service-account-issuer-discovery: kube lists the URLs each
	// grants, duplicates included).
	k.expect(lines(
		"Resources                                       Non-Resource URLs                      Resource Names   Verbs",
		"pods                                            []                                     []               [create get]",
		"selfsubjectreviews.authentication.k8s.io        []                                     []               [create]",
		"selfsubjectaccessreviews.authorization.k8s.io   []                                     []               [create]",
		"selfsubjectrulesreviews.authorization.k8s.io    []                                     []               [create]",
		"                                                [/.well-known/openid-configuration/]   []               [get]",
		"                                                [/.well-known/openid-configuration]    []               [get]",
		"                                                [/api/*]                               []               [get]",
		"                                                [/api]                                 []               [get]",
		"                                                [/apis/*]                              []               [get]",
		"                                                [/apis]                                []               [get]",
		"                                                [/healthz]                             []               [get]",
		"                                                [/healthz]                             []               [get]",
		"                                                [/livez]                               []               [get]",
		"                                                [/livez]                               []               [get]",
		"                                                [/openapi/*]                           []               [get]",
		"                                                [/openapi]                             []               [get]",
		"                                                [/openid/v1/jwks/]                     []               [get]",
		"                                                [/openid/v1/jwks]                      []               [get]",
		"                                                [/readyz]                              []               [get]",
		"                                                [/readyz]                              []               [get]",
		"                                                [/version/]                            []               [get]",
		"                                                [/version/]                            []               [get]",
		"                                                [/version]                             []               [get]",
		"                                                [/version]                             []               [get]"),
		"auth", "can-i", "--list", "-n", "cani", bot)

	// A node's rules cannot be listed (the Node authorizer decides on the
	// objects tied to it): the review says incomplete, with kube's error.
	// Nodes may renew their own client certificates (kubeadm's
	// node-autoapprove-certificate-rotation binding, TLS bootstrapping).
	k.expectOut(lines(
		"Resources                                                       Non-Resource URLs   Resource Names   Verbs",
		"selfsubjectreviews.authentication.k8s.io                        []                  []               [create]",
		"selfsubjectaccessreviews.authorization.k8s.io                   []                  []               [create]",
		"selfsubjectrulesreviews.authorization.k8s.io                    []                  []               [create]",
		"certificatesigningrequests.certificates.k8s.io/selfnodeclient   []                  []               [create]",
		"                                                                [/api/*]            []               [get]",
		"                                                                [/api]              []               [get]",
		"                                                                [/apis/*]           []               [get]",
		"                                                                [/apis]             []               [get]",
		"                                                                [/healthz]          []               [get]",
		"                                                                [/healthz]          []               [get]",
		"                                                                [/livez]            []               [get]",
		"                                                                [/livez]            []               [get]",
		"                                                                [/openapi/*]        []               [get]",
		"                                                                [/openapi]          []               [get]",
		"                                                                [/readyz]           []               [get]",
		"                                                                [/readyz]           []               [get]",
		"                                                                [/version/]         []               [get]",
		"                                                                [/version/]         []               [get]",
		"                                                                [/version]          []               [get]",
		"                                                                [/version]          []               [get]"),
		"Warning: the list may be incomplete: node authorizer does not support user rule resolution",
		"auth", "can-i", "--list", "--as=system:node:n1", "--as-group=system:nodes")
}
