#!/usr/bin/env node
'use strict';
// The package's `bin`: the CLI itself is the esbuild bundle out/cli.js (npm run build).
const { main } = require('../out/cli.js');
main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
