// Package serviceaccount is kube's ServiceAccount tokens: the key that
// signs them (LoadOrCreateKey: ECDSA P-256 for a new data dir, RSA or
// ECDSA read from a file, as kube-apiserver accepts both), the Issuer that
// signs JWTs (RS256, or ES256/ES384/ES512 by the key's curve) with kube's
// claims for a TokenRequest, the Validator that authenticates them
// (signature, times, issuer, audience, and the ServiceAccount and bound pod
// still existing, looked up in caches) and the issuer discovery documents
// (/.well-known/openid-configuration, /openid/v1/jwks) that let other
// systems verify them. Every JWT goes through github.com/golang-jwt/jwt/v5.
package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
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

	"github.com/golang-jwt/jwt/v5"
)

// keyBits is the size of the RSA keys GenerateKey creates, as kubeadm's
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

// GenerateECDSAKey returns a new ECDSA P-256 signing key (ES256): signing
// a token with it costs a small fraction of an RSA-2048 signature, and
// every pod's projected token is signed once per pod.
func GenerateECDSAKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	return key, nil
}

// LoadOrCreateKey reads the private key PEM at path (RSA or ECDSA), or
// creates an ECDSA P-256 one there (mode 0600, its directory 0700) when
// there is none, so that tokens stay valid across restarts of `up`. A key
// written by an earlier version (RSA) keeps signing.
func LoadOrCreateKey(path string) (crypto.Signer, error) {
	key, err := ReadPrivateKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	ecKey, err := GenerateECDSAKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		return nil, fmt.Errorf("encode service account key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the directory of %s: %w", path, err)
	}
	// "EC PRIVATE KEY" (SEC 1), as `openssl ecparam -genkey` writes it
	// and kube reads it.
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
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
	return ecKey, nil
}

// ReadPrivateKey reads the first RSA or ECDSA private key (PKCS#1 "RSA
// PRIVATE KEY", SEC 1 "EC PRIVATE KEY" or PKCS#8 "PRIVATE KEY") of the PEM
// file at path: kube's --service-account-signing-key-file.
func ReadPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service account signing key: %w", err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("service account signing key %s: no RSA or ECDSA private key in it", path)
		}
		if key := parsePrivate(block); key != nil {
			return key, nil
		}
	}
}

func parsePrivate(block *pem.Block) crypto.Signer {
	if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return key
	}
	if key, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		if signingMethod(&key.PublicKey) != nil {
			return key
		}
		return nil
	}
	if key, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := key.(crypto.Signer); ok && signingMethod(s.Public()) != nil {
			return s
		}
	}
	return nil
}

// signingMethod is the JWT algorithm kube uses with pub: RS256 for RSA,
// ES256, ES384 or ES512 for ECDSA on P-256, P-384 or P-521; nil for any
// other key, which kube refuses.
func signingMethod(pub crypto.PublicKey) jwt.SigningMethod {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jwt.SigningMethodRS256
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jwt.SigningMethodES256
		case elliptic.P384():
			return jwt.SigningMethodES384
		case elliptic.P521():
			return jwt.SigningMethodES512
		}
	}
	return nil
}

// usable keeps pub when it is a key tokens can be verified with.
func usable(pub any) (crypto.PublicKey, bool) {
	if signingMethod(pub) == nil {
		return nil, false
	}
	return pub, true
}

// ReadPublicKeys reads every RSA or ECDSA key of the PEM file at path,
// public ("PUBLIC KEY", "RSA PUBLIC KEY", a certificate) or private (its
// public half), as kube reads --service-account-key-file; other blocks are
// skipped as kube tolerates them.
func ReadPublicKeys(path string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read service account key file: %w", err)
	}
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if priv := parsePrivate(block); priv != nil {
			keys = append(keys, priv.Public())
			continue
		}
		if pub, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
			keys = append(keys, pub)
			continue
		}
		if pub, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
			if k, ok := usable(pub); ok {
				keys = append(keys, k)
			}
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			if k, ok := usable(cert.PublicKey); ok {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("service account key file %s: no RSA or ECDSA keys in it", path)
	}
	return keys, nil
}

// KeyID is the kid of pub as kube computes it: the unpadded base64url of
// the SHA-256 of the key's DER (PKIX) encoding, so that a verifier picks
// the key from a JWKS.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode service account public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
