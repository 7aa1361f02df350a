// Drives a corekube server through `kubectl proxy` with a client that
// swagger-typescript-api generated from corekube's own OpenAPI document
// (the test fetches /openapi/v2 through the proxy and runs the generator).
// Usage: node sdk.mjs GENERATED_API_JS PROXY_URL NAMESPACE POD
// Prints one JSON object with what the server answered; the Go test
// (test/e2e/clients_test.go) checks it. Any failure exits non-zero.
import { pathToFileURL } from 'node:url';

const [apiFile, baseUrl, namespace, podName] = process.argv.slice(2);
if (!apiFile || !baseUrl || !namespace || !podName) {
  console.error('usage: node sdk.mjs GENERATED_API_JS PROXY_URL NAMESPACE POD');
  process.exit(2);
}

const { Api } = await import(pathToFileURL(apiFile).href);
const api = new Api({ baseUrl });
// Generated with --module-name-index 1: the core group's routes are api.v1.
// kube's OpenAPI document declares request bodies as */* (as
// kube-apiserver's does), so the generator cannot know the body is JSON:
// callers say so, as with any SDK generated from kube's document.
const json = { type: 'application/json' };

// A failed call throws the Response, whose .error holds kube's Status.
async function call(name, promise) {
  try {
    return (await promise).data;
  } catch (e) {
    throw new Error(`${name}: ${e.status ?? ''} ${JSON.stringify(e.error ?? String(e))}`);
  }
}

const result = {};
const before = await call('list', api.v1.listCoreV1NamespacedPod(namespace));
result.listKind = before.kind;
result.before = before.items.map((p) => p.metadata.name);

const created = await call(
  'create',
  api.v1.createCoreV1NamespacedPod(
    namespace,
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName, labels: { client: 'generated' } },
      spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] },
    },
    undefined,
    json,
  ),
);
result.created = { name: created.metadata.name, uid: created.metadata.uid };

const read = await call('read', api.v1.readCoreV1NamespacedPod(podName, namespace));
result.read = { name: read.metadata.name, uid: read.metadata.uid, image: read.spec.containers[0].image };

const after = await call('list', api.v1.listCoreV1NamespacedPod(namespace, { labelSelector: 'client=generated' }));
result.after = after.items.map((p) => p.metadata.name);

const deleted = await call('delete', api.v1.deleteCoreV1NamespacedPod(podName, namespace, undefined, undefined, json));
result.deleted = { kind: deleted.kind, name: deleted.metadata?.name };

console.log(JSON.stringify(result));
