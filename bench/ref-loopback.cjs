// Preloaded into the reference daemon by compare.sh (node --require) so that
// it listens on 127.0.0.1 only: agent-backend@0.13.2 calls app.listen(port)
// with no host, which binds every interface, and has no --bind flag.
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args.length === 1 || typeof args[1] === 'function')) {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
