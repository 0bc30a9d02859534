/**
 * workspace/gains.ts: the model files a compiling script imports, read from disk for the editor's PL306 facts. Which
 * files an import names (bare, relative, dotted, through the workspace list), the bounds, and the tracker on real
 * files: analysed once per modification, the answer a model file gives (loses at 768 wide, gains at 4096), a file
 * open in the editor left to its own analysis, a deleted file forgotten.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { PythonParser } from '../../server/src/engine/parser';
import { importedFiles, ImportedModelGains, MAX_FILES_PER_SCRIPT } from '../../server/src/workspace/gains';
import { analyze, initParser } from './analysis-helpers';
import { gpt } from './gpt-model';

const TRAIN = 'import torch\nfrom model import GPT\nmodel = torch.compile(GPT())\nloss.backward()\noptimizer.step()\n';

describe('workspace/gains: the models a compiling script imports', () => {
  before(initParser);

  describe('importedFiles', () => {
    const has = (...paths: string[]) => (p: string) => paths.includes(p);

    it('a bare name is the module in the script\'s folder (a file or a package); libraries are not files there', () => {
      const ir = analyze('import torch\nimport torch.nn as nn\nfrom model import GPT, GPTConfig\nimport utils\n');
      assert.deepEqual(importedFiles('/p/train.py', ir, [], has('/p/model.py', '/p/utils/__init__.py')), ['/p/model.py', '/p/utils/__init__.py']);
      assert.deepEqual(importedFiles('/p/train.py', ir, [], has()), []);
    });

    it('a relative import and a dotted one resolve from the folder; a dotted one also through the workspace list', () => {
      const rel = analyze('from .model import GPT\n');
      assert.deepEqual(importedFiles('/p/train.py', rel, [], has('/p/model.py')), ['/p/model.py']);
      const dotted = analyze('from pkg.models.gpt import GPT\n');
      assert.deepEqual(importedFiles('/p/train.py', dotted, [], has('/p/pkg/models/gpt.py')), ['/p/pkg/models/gpt.py']);
      // The script in scripts/, the package at the workspace root: found by its path's end in the scan's list.
      assert.deepEqual(importedFiles('/r/scripts/train.py', dotted, ['/r/pkg/models/gpt.py', '/r/other.py'], has()), ['/r/pkg/models/gpt.py']);
      // A bare name is never looked up across the workspace: `from model import` means the folder's model.py.
      assert.deepEqual(importedFiles('/r/scripts/train.py', analyze('from model import GPT\n'), ['/r/model.py'], has()), []);
    });

    it('the script itself is not its own model; at most MAX_FILES_PER_SCRIPT files', () => {
      assert.deepEqual(importedFiles('/p/model.py', analyze('from model import GPT\n'), [], has('/p/model.py')), []);
      const many = analyze(Array.from({ length: 40 }, (_, i) => `from m${i} import X${i}`).join('\n') + '\n');
      const all = Array.from({ length: 40 }, (_, i) => `/p/m${i}.py`);
      assert.equal(importedFiles('/p/train.py', many, [], has(...all)).length, MAX_FILES_PER_SCRIPT);
    });
  });

  describe('ImportedModelGains on files', () => {
    let dir: string;
    let parser: PythonParser;
    before(async () => { parser = await PythonParser.create(); });
    after(() => parser.dispose());
    beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pl-gains-')); });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    function tracker(open: string[] = []) {
      const events: number[] = [];
      let analysed = 0;
      const gains = new ImportedModelGains({
        parser: () => { analysed++; return parser; },
        settings: async () => DEFAULT_SETTINGS,
        workspaceFiles: () => [],
        isOpen: (p) => open.includes(p),
        changed: () => events.push(gains.generation),
      });
      return { gains, events, analysed: () => analysed };
    }
    const settle = () => new Promise((r) => setTimeout(r, 50));

    it('reads the model once, answers as its analysis does, and again only when the file changes', async () => {
      const model = join(dir, 'model.py');
      writeFileSync(model, gpt(768, 12));
      const { gains, events, analysed } = tracker();
      const ir = analyze(TRAIN);
      gains.track(join(dir, 'train.py'), ir);
      await settle();
      assert.deepEqual(gains.facts(), [[model, { candidates: true, gains: false }]]);
      assert.deepEqual(events, [1]);
      gains.track(join(dir, 'train.py'), ir);
      await settle();
      assert.equal(analysed(), 1, 'unchanged on disk: not analysed again');
      assert.deepEqual(events, [1]);

      writeFileSync(model, gpt(4096, 6));
      const later = new Date(Date.now() + 5000);
      utimesSync(model, later, later);
      gains.touched(model);
      await settle();
      assert.deepEqual(gains.facts(), [[model, { candidates: true, gains: true }]]);
      assert.deepEqual(events, [1, 2]);

      rmSync(model);
      gains.touched(model);
      await settle();
      assert.deepEqual(gains.facts(), []);
      assert.deepEqual(events, [1, 2, 3]);
    });

    it('a script that does not compile, and a model open in the editor, are not read', async () => {
      const model = join(dir, 'model.py');
      writeFileSync(model, gpt(768, 12));
      const eager = tracker();
      eager.gains.track(join(dir, 'train.py'), analyze('import torch\nfrom model import GPT\nmodel = GPT()\nloss.backward()\n'));
      await settle();
      assert.deepEqual(eager.gains.facts(), []);
      const opened = tracker([model]);
      opened.gains.track(join(dir, 'train.py'), analyze(TRAIN));
      await settle();
      assert.deepEqual(opened.gains.facts(), []);
      assert.equal(opened.analysed(), 0);
    });
  });
});
