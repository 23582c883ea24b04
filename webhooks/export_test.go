package webhooks

// Signature is signature, for the Standard Webhooks test vector.
var Signature = signature
