// Drives a corekube server with the official JavaScript client,
// @kubernetes/client-node, loading the kubeconfig `corekube up` wrote as it
// is (its CA verified, its client certificate presented; no skipTLSVerify).
// Usage: node client.mjs KUBECONFIG NAMESPACE POD
// Prints one JSON object with what the server answered; the Go test
// (test/e2e/clients_test.go) checks it. Any failure exits non-zero with the
// error on stderr.
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, namespace, podName] = process.argv.slice(2);
if (!kubeconfig || !namespace || !podName) {
  console.error('usage: node client.mjs KUBECONFIG NAMESPACE POD');
  process.exit(2);
}

const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const result = { server: kc.getCurrentCluster().server };

const nsList = await core.listNamespace();
result.namespaces = nsList.items.map((ns) => ns.metadata.name);

const created = await core.createNamespacedPod({
  namespace,
  body: {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName, labels: { client: 'node' } },
    spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] },
  },
});
result.created = { name: created.metadata.name, uid: created.metadata.uid };

const read = await core.readNamespacedPod({ name: podName, namespace });
result.read = { name: read.metadata.name, uid: read.metadata.uid, image: read.spec.containers[0].image };

// Watch from the start (no resourceVersion) so the pod arrives as ADDED;
// the first event ends the watch. A watch that never delivers one fails on
// the timer rather than hanging the test.
result.watched = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no watch event within 20s')), 20000);
  let controller;
  let seen;
  new k8s.Watch(kc)
    .watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { fieldSelector: `metadata.name=${podName}` },
      (type, obj) => {
        if (seen) return;
        seen = { type, name: obj.metadata.name, uid: obj.metadata.uid };
        clearTimeout(timer);
        resolve(seen);
        controller?.abort();
      },
      (err) => {
        // Called when the stream ends, also after our own abort.
        if (!seen) {
          clearTimeout(timer);
          reject(err ?? new Error('watch ended without an event'));
        }
      },
    )
    .then((c) => {
      controller = c;
      if (seen) c.abort();
    }, reject);
});

const deleted = await core.deleteNamespacedPod({ name: podName, namespace });
result.deleted = { kind: deleted.kind, name: deleted.metadata?.name };

console.log(JSON.stringify(result));
