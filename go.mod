module herald

go 1.26.0

require (
	github.com/julienschmidt/httprouter v1.3.0
	go.etcd.io/bbolt v1.4.3
	golang.org/x/crypto v0.58.0
)

require golang.org/x/sys v0.49.0 // indirect
