// s3rver.js - runs s3rver (tests/node_modules, pinned by tests/package-lock.json)
// with its filesystem backend in DIR on 127.0.0.1 and an ephemeral port,
// creating BUCKET.  Prints "http://127.0.0.1:PORT" once listening.  The
// same server answers virtual-hosted-style requests to
// http://BUCKET.s3.localhost:PORT (endpoint http://s3.localhost:PORT).
//
// encoding-type=url: s3rver 3.7.1 reads the parameter and ignores it (its
// bucket controller says "currently unimplemented"), so a key holding a
// character XML 1.0 cannot carry (U+0001) makes its listing unparsable.  This
// launcher adds what AWS does in that mode: Key, Prefix, StartAfter,
// Delimiter and CommonPrefixes/Prefix percent-encoded ('/' kept, space as
// '+', as MinIO's s3URLEncode and botocore's unquote_plus agree) and
// <EncodingType>url</EncodingType> in the answer; any other value is
// InvalidArgument.  Without the parameter the answer is s3rver's own.
// Usage: node s3rver.js DIR BUCKET
'use strict';
const path = require('path');
const lib = path.join(__dirname, '..', 'node_modules', 's3rver', 'lib');
const bucketCtrl = require(path.join(lib, 'controllers', 'bucket'));
const S3Error = require(path.join(lib, 'models', 'error'));
const S3rver = require(path.join(__dirname, '..', 'node_modules', 's3rver'));

function s3UrlEncode(s) {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-_.~\/*]/.test(c)) out += c;
    else if (c === ' ') out += '+';
    else out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

const getBucket = bucketCtrl.getBucket;
bucketCtrl.getBucket = async function getBucketEncoded(ctx) {
  const enc = ctx.query['encoding-type'];
  if (enc !== undefined && enc !== 'url') {
    throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request', {
      ArgumentName: 'encoding-type',
      ArgumentValue: enc,
    });
  }
  await getBucket(ctx);
  const r = ctx.body && ctx.body.ListBucketResult;
  if (enc !== 'url' || !r) return;
  for (const f of ['Prefix', 'StartAfter', 'Delimiter']) {
    if (typeof r[f] === 'string') r[f] = s3UrlEncode(r[f]);
  }
  for (const o of r.Contents || []) o.Key = s3UrlEncode(o.Key);
  for (const p of r.CommonPrefixes || []) p.Prefix = s3UrlEncode(p.Prefix);
  r.EncodingType = 'url';
};

const [dir, bucket] = process.argv.slice(2);
if (!dir || !bucket) {
  console.error('usage: node s3rver.js DIR BUCKET');
  process.exit(2);
}
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  directory: dir,
  silent: true,
  // virtual-hosted requests: BUCKET.s3.localhost:PORT (curl resolves
  // *.localhost to the loopback itself); path-style ones go to 127.0.0.1
  serviceEndpoint: 'localhost',
  configureBuckets: [{ name: bucket }],
});
server.run().then(
  (addr) => {
    const port = addr && addr.port ? addr.port : server.httpServer.address().port;
    console.log(`http://127.0.0.1:${port}`);
  },
  (err) => {
    console.error(`s3rver: ${err}`);
    process.exit(1);
  },
);
process.on('SIGTERM', () => server.close().then(() => process.exit(0)));
