package mail

import (
	"bytes"
	htmltemplate "html/template"
	"text/template"
	"time"
)

// The e-mails' words: each a plain-text body and an HTML one saying the
// same, since some mail programs show only one of them.

// PasswordReset is the e-mail that carries a password-reset link for the
// account of to, from the instance named instance; the link works until
// expires.
func PasswordReset(to, instance, link string, expires time.Time) (Message, error) {
	data := resetData{Instance: instance, Link: link, Expires: expires.UTC().Format("2 January 2006, 15:04 MST")}
	m := Message{Kind: "password-reset", To: to, Subject: "Reset your password on " + instance}
	var text, html bytes.Buffer
	if err := resetText.Execute(&text, data); err != nil {
		return Message{}, err
	}
	if err := resetHTML.Execute(&html, data); err != nil {
		return Message{}, err
	}
	m.Text, m.HTML = text.String(), html.String()
	return m, nil
}

type resetData struct {
	Instance, Link, Expires string
}

var resetText = template.Must(template.New("reset").Parse(`Someone, probably you, asked to reset the password of your account on {{.Instance}}.

To choose a new password, open this link:

{{.Link}}

It works once, until {{.Expires}}. Using it signs your account out everywhere.

If you did not ask, ignore this e-mail: your password stays as it is.
`))

var resetHTML = htmltemplate.Must(htmltemplate.New("reset").Parse(`<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<p>Someone, probably you, asked to reset the password of your account on {{.Instance}}.</p>
<p><a href="{{.Link}}">Choose a new password</a></p>
<p>The link works once, until {{.Expires}}. Using it signs your account out everywhere.</p>
<p>If you did not ask, ignore this e-mail: your password stays as it is.</p>
</body></html>
`))
