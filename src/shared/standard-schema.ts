/**
 * The part of the Standard Schema spec (v1, standardschema.dev) cohort reads, declared here so
 * that no schema library is a dependency: zod 4, valibot, arktype and others put these members
 * under `~standard` on their schemas. `validate` is Standard Schema; `jsonSchema` is its sibling
 * spec, Standard JSON Schema. A library may give either or both; an output schema needs a JSON
 * Schema from somewhere (`jsonSchema`, or a `toJSONSchema`/`toJsonSchema` method), since that is
 * what the model is shown and what the worker checks replies against.
 */
export interface StandardSchema<Input = unknown, Output = Input> {
  readonly '~standard': StandardProps<Input, Output>;
}

/** What a Standard Schema keeps under `~standard`. */
export interface StandardProps<Input = unknown, Output = Input> {
  /** The spec's version: 1 is the only one. */
  readonly version: 1;
  /** The library that made it (`zod`, `valibot`, `arktype`). */
  readonly vendor: string;
  /** Carries the input and output types; never read at run time. */
  readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  /** Parses a value: its output (transforms and defaults applied) or what is wrong with it. */
  readonly validate?: (
    value: unknown,
    options?: { readonly libraryOptions?: Record<string, unknown> | undefined } | undefined,
  ) => StandardResult<Output> | Promise<StandardResult<Output>>;
  /** JSON Schemas of the input and the output types; each may throw for a type JSON cannot state. */
  readonly jsonSchema?: {
    readonly input: (options: JsonSchemaConversion) => Record<string, unknown>;
    readonly output: (options: JsonSchemaConversion) => Record<string, unknown>;
  };
}

/** What a conversion to JSON Schema is asked for: the draft (the spec's `target`). */
export interface JsonSchemaConversion {
  readonly target: 'draft-07' | 'draft-2020-12' | 'openapi-3.0' | (string & {});
  readonly libraryOptions?: Record<string, unknown> | undefined;
}

/** A parse that succeeded (no `issues`) or failed (`issues`). */
export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: readonly StandardIssue[] };

/** One thing wrong with a value, and where. */
export interface StandardIssue {
  readonly message: string;
  readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[] | undefined;
}

/** The type a Standard Schema parses values into. */
export type StandardOutput<S extends StandardSchema> = NonNullable<
  S['~standard']['types']
>['output'];

/**
 * Whether `value` presents itself as a Standard Schema: a `~standard` object. An arktype type is
 * a function, so functions count too. Its version and members are checked where it is used.
 */
export function isStandardSchema(value: unknown): value is StandardSchema {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as { '~standard'?: unknown })['~standard'];
  return typeof props === 'object' && props !== null;
}
