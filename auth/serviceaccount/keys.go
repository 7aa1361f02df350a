// Package serviceaccount is kube's ServiceAccount tokens: the RSA key that
// signs them (LoadOrCreateKey), the Issuer that signs RS256 JWTs with
// kube's claims for a TokenRequest, the Validator that authenticates them
// (signature, times, issuer, audience, and the ServiceAccount and bound pod
// still existing, looked up in caches) and the issuer discovery documents
// (/.well-known/openid-configuration, /openid/v1/jwks) that let other
// systems verify them. Every JWT goes through github.com/golang-jwt/jwt/v5.
package serviceaccount

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// keyBits is the size of the keys LoadOrCreateKey creates, as kubeadm's
// sa.key.
const keyBits = 2048

// GenerateKey returns a new RSA signing key (for a server started without
// one: its tokens die with it).
func GenerateKey() (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	return key, nil
}

// LoadOrCreateKey reads the RSA private key PEM at path, or creates one
// there (mode 0600, its directory 0700) when there is none, so that tokens
// stay valid across restarts of `up`.
func LoadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	key, err := ReadPrivateKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key, err = GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the directory of %s: %w", path, err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// O_EXCL: two processes starting on the same data dir must not both
	// write a key; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return ReadPrivateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create service account key %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("write service account key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write service account key %s: %w", path, err)
	}
	return key, nil
}

// ReadPrivateKey reads the first RSA private key (PKCS#1 "RSA PRIVATE KEY"
// or PKCS#8 "PRIVATE KEY") of the PEM file at path: kube's
// --service-account-signing-key-file.
func ReadPrivateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service account signing key: %w", err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("service account signing key %s: no RSA private key in it", path)
		}
		if key := parsePrivate(block); key != nil {
			return key, nil
		}
	}
}

func parsePrivate(block *pem.Block) *rsa.PrivateKey {
	if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return key
	}
	if key, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if rsaKey, ok := key.(*rsa.PrivateKey); ok {
			return rsaKey
		}
	}
	return nil
}

// ReadPublicKeys reads every RSA key of the PEM file at path, public
// ("PUBLIC KEY", "RSA PUBLIC KEY", a certificate) or private (its public
// half), as kube reads --service-account-key-file; other blocks are
// skipped as kube tolerates them.
func ReadPublicKeys(path string) ([]*rsa.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service account key file: %w", err)
	}
	var keys []*rsa.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if priv := parsePrivate(block); priv != nil {
			keys = append(keys, &priv.PublicKey)
			continue
		}
		if pub, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
			keys = append(keys, pub)
			continue
		}
		if pub, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
			if rsaKey, ok := pub.(*rsa.PublicKey); ok {
				keys = append(keys, rsaKey)
			}
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			if rsaKey, ok := cert.PublicKey.(*rsa.PublicKey); ok {
				keys = append(keys, rsaKey)
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("service account key file %s: no RSA keys in it", path)
	}
	return keys, nil
}

// KeyID is the kid of pub as kube computes it: the unpadded base64url of
// the SHA-256 of the key's DER (PKIX) encoding, so that a verifier picks
// the key from a JWKS.
func KeyID(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode service account public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
