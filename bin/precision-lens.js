#!/usr/bin/env node
'use strict';
// The package's `bin`: the CLI itself is the esbuild bundle out/cli.js (npm run build).
require('../out/cli.js').runFromProcess(process.argv.slice(2));
