/**
 * The Standard Schema v1 interface (https://standardschema.dev), copied here as the spec
 * intends so that the SDK has no runtime dependency for it. zod (3.24+), valibot (1.0+),
 * ArkType and Effect Schema (through `Schema.standardSchemaV1`) all implement it.
 *
 * @module
 */

/** A schema any Standard Schema library can hand over. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

export declare namespace StandardSchemaV1 {
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  export type Result<Output> = SuccessResult<Output> | FailureResult;
  export interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  export interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  export interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  export interface PathSegment {
    readonly key: PropertyKey;
  }
  export interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<
    Schema["~standard"]["types"]
  >["input"];
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<
    Schema["~standard"]["types"]
  >["output"];
}

/** A value failed its queue's schema: on enqueue (nothing stored) or on receive. */
export class ValidationError extends Error {
  override readonly name = "ValidationError";
  /** Every issue, as the schema library reported it. */
  readonly issues: ReadonlyArray<StandardSchemaV1.Issue>;

  constructor(issues: ReadonlyArray<StandardSchemaV1.Issue>, what = "the event") {
    super(`${what} does not match the queue's schema: ${describeIssues(issues)}`);
    this.issues = issues;
  }
}

/** `path: message; path: message`, the issues in one line. */
export function describeIssues(issues: ReadonlyArray<StandardSchemaV1.Issue>): string {
  return issues
    .map((issue) => {
      const path = (issue.path ?? [])
        .map((segment) => String(typeof segment === "object" ? segment.key : segment))
        .join(".");
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    })
    .join("; ");
}

/** Validates `value`; the schema's output, or a {@link ValidationError}. */
export async function validate<Input, Output>(
  schema: StandardSchemaV1<Input, Output>,
  value: unknown,
  what?: string,
): Promise<Output> {
  const result = await schema["~standard"].validate(value);
  if (result.issues !== undefined) throw new ValidationError(result.issues, what);
  return result.value;
}
