module github.com/rknp/rknp/tests/sid/k3slike

go 1.24.2

require (
	github.com/rootless-containers/rootlesskit/v2 v2.3.6
	github.com/sirupsen/logrus v1.9.3
)

require (
	github.com/containernetworking/plugins v1.9.0 // indirect
	github.com/gofrs/flock v0.12.1 // indirect
	github.com/gorilla/mux v1.8.1 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
