# syntax=docker/dockerfile:1
# The voiceroom image: one static binary on an empty base, run as a
# non-root user. Every role runs from it (VOICEROOM_ROLES); see deploy/compose.yaml.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t voiceroom .
#   docker run --rm voiceroom version
# The build context leaves .git out, so VERSION is the only version the image
# has (without it, `voiceroom version` says dev).

# --- build: the same go build as on a developer's machine, static (no cgo)
# so that it runs on scratch. deploy/deploy_test.go runs this command.
FROM golang:1.26.8 AS build
ARG VERSION=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/voiceroom ./cmd/voiceroom
# An empty data directory the runtime user owns (the development JWT key and,
# with embedded NATS, the stream files).
RUN mkdir -p /out/data

# --- runtime: the binary, CA certificates (Tencent IM is HTTPS) and nothing else.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/voiceroom /voiceroom
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# The API on every address; the operators' listener (/metrics, profiles) on
# the container's loopback only: a deployment that scrapes it sets
# VOICEROOM_OPS_ADDR=0.0.0.0:9090 on a private network (deploy/compose.yaml).
ENV VOICEROOM_HTTP_ADDR=0.0.0.0:8080 \
    VOICEROOM_OPS_ADDR=127.0.0.1:9090 \
    VOICEROOM_DATA_DIR=/data \
    VOICEROOM_LOG_FORMAT=json
EXPOSE 8080
# No shell or curl in the image: the binary asks its own /readyz on the
# public listener (VOICEROOM_HTTP_ADDR, reached on loopback), which is there
# whatever VOICEROOM_OPS_ADDR says.
HEALTHCHECK --interval=10s --timeout=4s --start-period=30s --retries=3 \
    CMD ["/voiceroom", "healthcheck", "--timeout", "3s"]
ENTRYPOINT ["/voiceroom"]
CMD ["serve"]
