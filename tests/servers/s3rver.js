// s3rver.js - runs s3rver (tests/node_modules, pinned by tests/package-lock.json)
// with its filesystem backend in DIR on 127.0.0.1 and an ephemeral port,
// creating BUCKET.  Prints "http://127.0.0.1:PORT" once listening.  The
// same server answers virtual-hosted-style requests to
// http://BUCKET.s3.localhost:PORT (endpoint http://s3.localhost:PORT).
// Usage: node s3rver.js DIR BUCKET
'use strict';
const path = require('path');
const S3rver = require(path.join(__dirname, '..', 'node_modules', 's3rver'));

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
