/** The URI with any `user:password@` replaced by `***@`, for messages and logs (redis://, s3://, nats://…). */
export function redactUri(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1***@');
}
