// Shared by the adapter and the node (never importing each other): a record's id, and its ack, retry or DLQ.
export * from './dlq.js';
export * from './message-id.js';
