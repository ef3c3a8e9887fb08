// The CloudEvent model at the bottom of the contract, as in the cloudevents SDK's event/message
// split: an event as plain data, and a message (binary-mode headers plus a body) that every
// binding (HTTP, NATS) and transport carries.

/** A CloudEvent as plain data, sent or received (the CloudEvents SDK's CloudEvent satisfies it). */
export interface CloudEventRecord {
  specversion: string;
  id: string;
  source: string;
  type: string;
  subject?: string;
  time?: string;
  datacontenttype?: string;
  /** A URI naming the schema `data` follows; on requests, their version (attributes.ts REQUESTED_DATASCHEMA_V2). */
  dataschema?: string;
  data?: unknown;
  [extension: string]: unknown;
}

/** A CloudEvent as a transport-neutral message: binary-mode headers plus a body. */
export interface Message {
  headers: Record<string, string>;
  body: Uint8Array | string;
}
