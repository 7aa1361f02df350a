#!/bin/sh
# Makes, once, the credentials every corekube process of the HA topology
# shares, in $COREKUBE_DIR (default /var/lib/corekube, the volume the API
# servers mount as --data-dir):
#
#   pki/ca.crt, pki/ca.key   the cluster CA (EC P-256). The API servers find
#                            it in <data-dir>/pki and issue their serving and
#                            admin certificates from it; the controllers sign
#                            CSRs with it (--cluster-signing-*).
#   pki/sa.key               the key (ECDSA P-256: ES256 tokens, cheap to sign
#                            for every pod) that signs ServiceAccount tokens
#                            on every API server (--service-account-*-key-file),
#                            so that a token from one is accepted by all. An
#                            existing RSA sa.key is kept and keeps working.
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
# With COREKUBE_ETCD_MEMBERS ("NAME=HOST[,HOST...] ...", e.g.
# "etcd-1=etcd-1.internal,10.0.0.11 etcd-2=..."), it also makes etcd's own
# CA and certificates, in <dir>/etcd:
#
#   etcd/ca.crt, ca.key      the etcd CA (apart from the cluster CA, as kubeadm)
#   etcd/NAME.crt, NAME.key  each member's certificate for its client and peer
#                            URLs (server and client auth; its HOSTs, localhost
#                            and 127.0.0.1)
#   etcd/apiserver-etcd-client.crt, .key
#                            the API servers' client certificate
#                            (--etcd-certfile, --etcd-keyfile; --etcd-cafile is
#                            etcd/ca.crt)
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
	openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
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

# etcd_cert NAME SUBJECT EKU [HOST...]: etcd/NAME.{crt,key} from the etcd CA.
etcd_cert() {
	name=$1 subject=$2 eku=$3
	shift 3
	out=$dir/etcd/$name
	[ -s "$out.crt" ] && return 0
	sans=""
	for h in "$@"; do
		case $h in
		*:*) kind=IP ;;
		*[!0-9.]*) kind=DNS ;;
		*) kind=IP ;;
		esac
		sans="$sans${sans:+,}$kind:$h"
	done
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$out.key" -out "$out.csr" -subj "$subject" 2>/dev/null
	{
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$eku"
		if [ -n "$sans" ]; then printf 'subjectAltName=%s\n' "$sans"; fi
	} >"$out.ext"
	openssl x509 -req -in "$out.csr" -CA "$dir/etcd/ca.crt" -CAkey "$dir/etcd/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days "$days" -extfile "$out.ext" -out "$out.crt" 2>/dev/null
	rm -f "$out.csr" "$out.ext"
}

if [ -n "${COREKUBE_ETCD_MEMBERS:-}" ]; then
	mkdir -p "$dir/etcd"
	if [ ! -s "$dir/etcd/ca.key" ]; then
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-keyout "$dir/etcd/ca.key" -out "$dir/etcd/ca.crt" -days "$days" -subj "/CN=etcd-ca" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
		chmod 0644 "$dir/etcd/ca.crt"
	fi
	for member in $COREKUBE_ETCD_MEMBERS; do
		name=${member%%=*}
		hosts=$(printf '%s' "${member#*=}" | tr ',' ' ')
		# shellcheck disable=SC2086 # one argument per host
		etcd_cert "$name" "/CN=$name" serverAuth,clientAuth $hosts localhost 127.0.0.1
	done
	etcd_cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
fi

client admin "/O=system:masters/CN=kubernetes-admin"
client scheduler "/CN=system:kube-scheduler"
client controllers "/O=system:masters/CN=system:kube-controller-manager"
client agent "/O=system:masters/CN=corekube-agent"

if [ -n "$owner" ]; then
	chown -R "$owner" "$dir"
fi
echo "corekube PKI ready in $dir (server $server)"
