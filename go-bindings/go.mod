module github.com/rknp/rknp/go-bindings

go 1.26.0

require (
	github.com/Masterminds/semver/v3 v3.5.0
	github.com/rootless-containers/rootlesskit/v3 v3.3.0
	github.com/sirupsen/logrus v1.10.2
	github.com/urfave/cli/v2 v2.27.7
)

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/apparentlymart/go-cidr v1.1.1 // indirect
	github.com/containernetworking/plugins v1.9.1 // indirect
	github.com/containers/gvisor-tap-vsock v0.8.9 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/gofrs/flock v0.13.1 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inetaf/tcpproxy v0.0.0-20260515195445-c159a6051109 // indirect
	github.com/insomniacslk/dhcp v0.0.0-20260901064844-234b97448fae // indirect
	github.com/miekg/dns v1.1.72 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/vpnkit v0.6.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/songgao/water v0.0.0-20200317203138-2b4b6d7c09d8 // indirect
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701 // indirect
	github.com/xrash/smetrics v0.0.0-20250705151800-55b8f293f342 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/mod v0.35.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.13.0 // indirect
	golang.org/x/tools v0.43.0 // indirect
	gvisor.dev/gvisor v0.0.0-20240916094835-a174eb65023f // indirect
)
