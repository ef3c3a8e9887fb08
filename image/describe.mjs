// Reads an OCI archive that image/build.sh wrote and records what `npm run release` and the
// install tests need: the manifest digest (what a registry serves it under, kept by
// `skopeo copy --preserve-digests`) and the sizes; prints them.
//
//   node image/describe.mjs <archive.oci.tar> <local reference> <out.json>
import { execFileSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

const [archive, reference, out] = process.argv.slice(2);
if (!archive || !reference || !out) {
  console.error('usage: node image/describe.mjs <archive.oci.tar> <local reference> <out.json>');
  process.exit(2);
}
const member = (path) => execFileSync('tar', ['-xOf', archive, path], { maxBuffer: 1 << 30 });
const blob = (digest) => member(`blobs/${digest.replace(':', '/')}`);

const index = JSON.parse(member('index.json').toString('utf8'));
const digest = index.manifests[0].digest;
const manifest = JSON.parse(blob(digest).toString('utf8'));
const compressedBytes = manifest.layers.reduce((n, l) => n + l.size, 0);
const unpackedBytes = manifest.layers.reduce((n, l) => n + (l.mediaType.endsWith('+gzip') ? gunzipSync(blob(l.digest)).length : l.size), 0);
const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
const info = {
  reference,
  digest,
  archive,
  archiveBytes: statSync(archive).size,
  compressedBytes,
  unpackedBytes,
  layers: manifest.layers.length,
};
writeFileSync(out, `${JSON.stringify(info, null, 2)}\n`);
console.log(`image: ${reference}@${digest}`);
console.log(`image: size ${mib(compressedBytes)} compressed (what a node pulls), ${mib(unpackedBytes)} unpacked, ${info.layers} layers`);
console.log(`image: archive ${archive}`);
