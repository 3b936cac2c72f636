package config

import (
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// secret reads a secret variable from NAME or from the file NAME_FILE names
// (a mounted Kubernetes Secret keeps it out of the pod spec and `env`), never
// both. A trailing newline of the file is not part of the secret.
func (p *parser) secret(name string) string {
	v, path := p.get(name), p.get(name+"_FILE")
	if path == "" {
		return v
	}
	if v != "" {
		p.fail(name+"_FILE", path, "and "+name+" are both set: keep one")
		return v
	}
	b, err := os.ReadFile(path)
	if err != nil {
		p.fail(name+"_FILE", path, "cannot be read: "+err.Error())
		return ""
	}
	return strings.TrimRight(string(b), "\r\n")
}

// withPassword puts the password of MYSQL_PASSWORD_FILE into dsn, so the DSN
// itself may live in a ConfigMap.
func (p *parser) withPassword(dsn string) string {
	const name = "MYSQL_PASSWORD_FILE"
	path := p.get(name)
	if path == "" {
		return dsn
	}
	b, err := os.ReadFile(path)
	if err != nil {
		p.fail(name, path, "cannot be read: "+err.Error())
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn // mysql() reports the DSN
	}
	if cfg.Passwd != "" {
		p.fail(name, path, "is set and MYSQL_DSN has a password too: keep one")
		return dsn
	}
	cfg.Passwd = strings.TrimRight(string(b), "\r\n")
	return cfg.FormatDSN()
}
