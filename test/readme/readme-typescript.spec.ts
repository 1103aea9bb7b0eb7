import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';

const ROOT = join(__dirname, '..', '..');

/** Every ```ts block of the README, with the line it starts on. */
function typescriptBlocks(markdown: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```ts\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const start = i + 1;
    while (i + 1 < lines.length && !/^\s*```\s*$/.test(lines[i + 1])) i++;
    blocks.push({
      line: start + 1,
      code: lines
        .slice(start, i + 1)
        .map((line) => line.slice(indent))
        .join('\n'),
    });
    i++;
  }
  return blocks;
}

/**
 * Each block is compiled as a module of its own (as a reader would paste it into a file), against the library's
 * sources and the workspace's packages. The files are served from memory at paths inside the repository, so that
 * packages resolve from its node_modules.
 */
function diagnostics(blocks: { line: number; code: string }[]): string[] {
  const files = new Map(
    blocks.map((block) => [join(ROOT, 'test', 'readme', `README.md-line-${block.line}.ts`), block.code]),
  );
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    esModuleInterop: true,
    skipLibCheck: true,
    noEmit: true,
    isolatedModules: true,
    baseUrl: ROOT,
    // The sources, as the workspace's tsconfig maps them: the README is checked without a build.
    paths: {
      'nestjs-dynamodb-idempotency': ['libs/idempotency/src'],
      'nestjs-dynamodb-idempotency/testing': ['libs/idempotency/src/testing'],
    },
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (name) => files.has(name) || fileExists(name);
  host.readFile = (name) => files.get(name) ?? readFile(name);
  host.getSourceFile = (name, version, ...rest) =>
    files.has(name) ? ts.createSourceFile(name, files.get(name)!, version) : getSourceFile(name, version, ...rest);
  const program = ts.createProgram([...files.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((diagnostic) => diagnostic.file && files.has(diagnostic.file.fileName))
    .map((diagnostic) => {
      const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      const blockLine = Number(/line-(\d+)/.exec(diagnostic.file!.fileName)![1]);
      return `README.md:${blockLine + line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`;
    });
}

describe('the README', () => {
  const blocks = typescriptBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));

  it('has TypeScript examples, each a module on its own', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    for (const block of blocks) expect(block.code).toMatch(/^import /m);
  });

  it('every TypeScript block type-checks against the library as written', () => {
    expect(diagnostics(blocks)).toEqual([]);
  });
});
