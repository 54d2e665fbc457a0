// Command git-server serves the GitOps back-end's repositories over Git's smart HTTP protocol with
// github.com/fluxcd/gitkit (the library behind Flux's own test git server), which runs the
// machine's `git` for upload-pack and receive-pack.
//
// Repositories live under -root as <owner>/<name>.git. Every request needs HTTP basic auth: the
// -credentials file (re-read on each request, so a scenario's credential can be added while the
// server runs) holds one "user password owner [mode]" line per credential; a credential reaches only
// the repositories under its owner directory, and one whose mode is "read" only fetches (a push,
// or the advertisement that starts one, is refused: 401). The mode "write", or none, fetches and
// pushes. -readonly refuses pushes for everyone.
package main

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/fluxcd/gitkit"
)

type grant struct {
	password, owner string
	readOnly        bool
}

func readCredentials(path string) (map[string]grant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]grant{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 && len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: want \"user password owner [mode]\", got %d fields", path, n, len(fields))
		}
		g := grant{password: fields[1], owner: fields[2]}
		if len(fields) == 4 {
			switch fields[3] {
			case "read":
				g.readOnly = true
			case "write":
			default:
				return nil, fmt.Errorf("%s:%d: mode %q, want read or write", path, n, fields[3])
			}
		}
		out[fields[0]] = g
	}
	return out, sc.Err()
}

// pushes tells a request that pushes (receive-pack) or asks for what a push starts with.
func pushes(req *gitkit.Request) bool {
	return strings.HasSuffix(req.URL.Path, "/git-receive-pack") ||
		req.URL.Query().Get("service") == "git-receive-pack"
}

// sameSecret compares two passwords in a time that does not depend on where they differ.
func sameSecret(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// within tells whether a repository name (gitkit joins it with path.Join, so it is clean: no "." or
// ".." segment survives) lies under the owner's directory.
func within(repo, owner string) bool {
	return owner != "" && !strings.Contains(owner, "/") && path.Clean(repo) == repo &&
		strings.HasPrefix(repo, owner+"/")
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	root := flag.String("root", "", "directory holding <owner>/<name>.git repositories")
	credentials := flag.String("credentials", "", "file of \"user password owner [mode]\" lines")
	autoCreate := flag.Bool("auto-create", false, "create a repository on its first push")
	readOnly := flag.Bool("readonly", false, "refuse every push")
	flag.Parse()
	if *root == "" || *credentials == "" {
		log.Fatal("-root and -credentials are required")
	}
	if _, err := readCredentials(*credentials); err != nil {
		log.Fatalf("credentials: %v", err)
	}

	srv := gitkit.New(gitkit.Config{Dir: *root, AutoCreate: *autoCreate, Auth: true, ReadOnly: *readOnly})
	srv.AuthFunc = func(cred gitkit.Credential, req *gitkit.Request) (bool, error) {
		grants, err := readCredentials(*credentials)
		if err != nil {
			return false, err
		}
		g, ok := grants[cred.Username]
		if !ok || !sameSecret(g.password, cred.Password) {
			return false, nil
		}
		if g.readOnly && pushes(req) {
			return false, nil
		}
		return within(req.RepoName, g.owner), nil
	}
	if err := srv.Setup(); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The address is the readiness signal for whoever started the server with port 0.
	fmt.Printf("listening on http://%s\n", ln.Addr())
	server := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.Serve(ln))
}
