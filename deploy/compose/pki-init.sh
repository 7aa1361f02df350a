#!/bin/sh
# Makes, once, the credentials every corekube process of the HA topology
# shares, in $COREKUBE_DIR (default /var/lib/corekube, the volume the API
# servers mount as --data-dir):
#
#   pki/ca.crt, pki/ca.key   the cluster CA (EC P-256). The API servers find
#                            it in <data-dir>/pki and issue their serving and
#                            admin certificates from it; the controllers sign
#                            CSRs with it (--cluster-signing-*).
#   pki/sa.key               the RSA key that signs ServiceAccount tokens on
#                            every API server (--service-account-*-key-file),
#                            so that a token from one is accepted by all.
#   <name>.kubeconfig        a client certificate from the CA for each
#                            component, pointing at $COREKUBE_SERVER (the
#                            load balancer): admin (kubernetes-admin,
#                            system:masters), scheduler (system:kube-scheduler),
#                            controllers (system:kube-controller-manager, in
#                            system:masters: the controllers delete and evict
#                            pods with their own credentials) and agent
#                            (corekube-agent, system:masters: one process runs
#                            several nodes; see docs/tls-bootstrapping.md for
#                            one identity per node).
#
# Files that exist are kept, so running it again is harmless. POSIX sh and
# the openssl command line (OpenSSL 3), nothing else: it runs in the compose
# file's pki-init container and on a bare host alike, and test/e2e runs it.
set -eu

dir=${COREKUBE_DIR:-/var/lib/corekube}
server=${COREKUBE_SERVER:-https://lb:6443}
days=${COREKUBE_PKI_DAYS:-3650}
owner=${COREKUBE_OWNER:-}

pki=$dir/pki
umask 077
mkdir -p "$pki"

if [ ! -s "$pki/ca.key" ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" -days "$days" -subj "/CN=corekube-ca" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
	chmod 0644 "$pki/ca.crt"
fi
if [ ! -s "$pki/sa.key" ]; then
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
fi

b64() { openssl base64 -A -in "$1"; }

# client NAME SUBJECT: <dir>/clients/NAME.{crt,key} and <dir>/NAME.kubeconfig.
client() {
	name=$1 subject=$2
	out=$dir/clients/$name
	mkdir -p "$dir/clients"
	if [ ! -s "$out.crt" ]; then
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-keyout "$out.key" -out "$out.csr" -subj "$subject" 2>/dev/null
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$out.ext"
		openssl x509 -req -in "$out.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
			-set_serial "0x$(openssl rand -hex 16)" -days "$days" -extfile "$out.ext" -out "$out.crt" 2>/dev/null
		rm -f "$out.csr" "$out.ext"
	fi
	cat >"$dir/$name.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: corekube
  cluster:
    server: $server
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(b64 "$out.crt")
    client-key-data: $(b64 "$out.key")
contexts:
- name: corekube
  context:
    cluster: corekube
    user: $name
    namespace: default
current-context: corekube
KUBECONFIG
}

client admin "/O=system:masters/CN=kubernetes-admin"
client scheduler "/CN=system:kube-scheduler"
client controllers "/O=system:masters/CN=system:kube-controller-manager"
client agent "/O=system:masters/CN=corekube-agent"

if [ -n "$owner" ]; then
	chown -R "$owner" "$dir"
fi
echo "corekube PKI ready in $dir (server $server)"
