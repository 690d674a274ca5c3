// Kubeconfig files for the admin, the controller-manager and restricted identities: each names
// the apiserver, trusts the run's CA, and authenticates with a client certificate of that CA.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for user (with groups) at path, signed by ca.
func writeKubeconfig(path, server string, ca *authority, user string, groups []string) error {
	pair, err := ca.clientCert(user, groups)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wasmop"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.certPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pair.certPEM, ClientKeyData: pair.keyPEM}
	cfg.Contexts["wasmop"] = &clientcmdapi.Context{Cluster: "wasmop", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "wasmop"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// userKubeconfigPath is where the kubeconfig minted for user and groups lives in dir/users. User
// names may hold characters a file name must not (`system:serviceaccount:ns:name`), so the name
// is reduced to safe characters and a hash of the full identity keeps distinct identities apart.
func userKubeconfigPath(dir, user string, groups []string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		default:
			return '_'
		}
	}, user)
	sum := sha256.Sum256([]byte(user + "\x00" + strings.Join(groups, "\x00")))
	return filepath.Join(dir, "users", fmt.Sprintf("%s-%s.kubeconfig", safe, hex.EncodeToString(sum[:4])))
}

// validateIdentity rejects a user or group the apiserver could not carry in a certificate.
func validateIdentity(user string, groups []string) error {
	if strings.TrimSpace(user) == "" {
		return fmt.Errorf("user name is empty")
	}
	for _, g := range groups {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("group name is empty in %q", strings.Join(groups, ","))
		}
	}
	return nil
}
