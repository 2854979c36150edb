//! One transport-neutral error code, so gateway, worker and adapters agree on the
//! HTTP and gRPC status of every domain error.

/// What kind of failure happened, independent of the transport that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The request is malformed or violates a precondition the caller controls.
    InvalidRequest,
    /// No credentials, or credentials that resolve to nothing.
    Unauthenticated,
    /// Valid credentials that may not act on the addressed resource.
    PermissionDenied,
    /// The addressed resource does not exist in the caller's scope.
    NotFound,
    /// The resource is in a state or at a version that conflicts with the request.
    Conflict,
    /// A precondition header (e.g. an expected heartbeat) did not hold.
    PreconditionFailed,
    /// The target no longer accepts the change (e.g. no live run).
    Gone,
    /// The request is well formed but names something that may not be used this way
    /// (e.g. binding a disabled sandbox policy version).
    Unprocessable,
    /// The request body is larger than the route accepts.
    PayloadTooLarge,
    /// The route exists but not for this HTTP method.
    MethodNotAllowed,
    /// The body's content type is not one the route reads.
    UnsupportedMediaType,
    /// The caller's request bucket is empty.
    RateLimited,
    /// A dependency (store, queue, bus, limiter) cannot be reached; fail closed.
    Unavailable,
    /// A bug or an unexpected backend answer.
    Internal,
}

impl Code {
    /// The HTTP status for this code.
    pub fn http_status(self) -> u16 {
        match self {
            Code::InvalidRequest => 400,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::NotFound => 404,
            Code::Conflict => 409,
            Code::PreconditionFailed => 412,
            Code::Gone => 410,
            Code::Unprocessable => 422,
            Code::PayloadTooLarge => 413,
            Code::MethodNotAllowed => 405,
            Code::UnsupportedMediaType => 415,
            Code::RateLimited => 429,
            Code::Internal => 500,
            Code::Unavailable => 503,
        }
    }

    /// The gRPC status code for this code.
    pub fn grpc_code(self) -> tonic::Code {
        match self {
            Code::InvalidRequest | Code::Unprocessable => tonic::Code::InvalidArgument,
            Code::Unauthenticated => tonic::Code::Unauthenticated,
            Code::PermissionDenied => tonic::Code::PermissionDenied,
            Code::NotFound => tonic::Code::NotFound,
            Code::Conflict => tonic::Code::Aborted,
            Code::PreconditionFailed | Code::Gone => tonic::Code::FailedPrecondition,
            Code::PayloadTooLarge => tonic::Code::OutOfRange,
            Code::MethodNotAllowed => tonic::Code::Unimplemented,
            Code::UnsupportedMediaType => tonic::Code::InvalidArgument,
            Code::RateLimited => tonic::Code::ResourceExhausted,
            Code::Internal => tonic::Code::Internal,
            Code::Unavailable => tonic::Code::Unavailable,
        }
    }

    /// Whether repeating the same request later may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, Code::RateLimited | Code::Unavailable | Code::Conflict)
    }
}
