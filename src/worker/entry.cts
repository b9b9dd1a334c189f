/**
 * The file piscina loads in each worker. Piscina tries `require()` before `import()`; on Node 20
 * requiring an ES module can race with importing it, which once in a while failed a worker's
 * start with ERR_INTERNAL_ASSERTION. This CommonJS shim is always required cleanly and loads the
 * ES task module with one dynamic `import()`.
 */
type TaskModule = typeof import('./child-task.js');

let loading: Promise<TaskModule> | undefined;
const load = (): Promise<TaskModule> => {
  loading ??= import('./child-task.js');
  return loading;
};

async function runChildBatch(
  batch: Parameters<TaskModule['default']>[0],
): ReturnType<TaskModule['default']> {
  return (await load()).default(batch);
}

async function warm(): Promise<number> {
  return (await load()).warm();
}

export = Object.assign(runChildBatch, { warm });
